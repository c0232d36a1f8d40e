"""Where am I running, with which profile, and on which devices?

The one dial of every notebook is the *profile*: ``smoke`` (tiny real model, offline, CPU, minutes)
or ``full`` (real weights and data, TPU/GPU). :func:`resolve` picks it, in this order:

1. the explicit argument (the notebook's ``PROFILE`` parameter),
2. the ``TUNIXKIT_PROFILE`` environment variable,
3. automatic: ``full`` on TPU/GPU, ``smoke`` on CPU,

and returns a :class:`Runtime` whose ``banner()`` says which and why.

Also here: platform detection (TPU/GPU/CPU; Kaggle/Colab/local), the device mesh over
``("fsdp", "tp")``, secret lookup that never prints a value, and the identity of the code that
runs (:func:`code_id`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import pathlib
import sys
import types
import warnings
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jax.sharding import Mesh

__all__ = [
    "DownloadError",
    "MissingSecretError",
    "Runtime",
    "compilation_cache",
    "make_mesh",
    "parameter_for_a_copy",
    "peak_memory",
    "smoke_kit",
]

PROFILES = ("smoke", "full")
ENV_PROFILE = "TUNIXKIT_PROFILE"
MESH_AXES = ("fsdp", "tp")
COMPILE_CACHE = "jax_cache"  # OUTPUT_DIR/<this>: compiled programs, kept for the next session


class DownloadError(RuntimeError):
    """A download (data, weights) failed; the message says what to do instead."""


def _refused(exc: BaseException) -> bool:
    """Whether a failed download was refused (HTTP 401/403): a gated model whose licence this
    account has not accepted, not a missing network."""
    status = getattr(getattr(exc, "response", None), "status_code", None)
    return status in (401, 403) or any(f"{code} Client Error" in str(exc) for code in (401, 403))


@contextlib.contextmanager
def downloading(what: str, instead: str, *, consent: str | None = None) -> Iterator[None]:
    """Turn a failed download of ``what`` (any ``OSError``: no network, offline mode, not found on
    the hub) into a :class:`DownloadError` that says what to do: turn the Internet on, or
    ``instead`` (e.g. attach the data set and set a parameter to its path). A refused download
    (HTTP 401/403) of a gated model names ``consent``, the page where its licence is accepted.

    >>> class Refused(OSError): response = type("R", (), {"status_code": 403})()
    >>> with downloading("google/gemma-3 from Kaggle", "attach it",  # doctest: +ELLIPSIS
    ...                  consent="https://www.kaggle.com/models/google/gemma-3"):
    ...     raise Refused("403 Client Error: Forbidden")
    Traceback (most recent call last):
    ...
    tunixkit.runtime.DownloadError: google/gemma-3 from Kaggle: access refused (...). ...accept...

    >>> with downloading("openai/gsm8k",  # doctest: +NORMALIZE_WHITESPACE
    ...                  "set GSM8K_SOURCE='file'"):
    ...     raise ConnectionError("Couldn't reach 'openai/gsm8k' on the Hub")
    Traceback (most recent call last):
    ...
    tunixkit.runtime.DownloadError: could not download openai/gsm8k (ConnectionError: Couldn't
    reach 'openai/gsm8k' on the Hub). Turn the Internet on (Kaggle: Settings > Internet on; it
    needs a verified phone number), or set GSM8K_SOURCE='file'.
    """
    try:
        yield
    except OSError as exc:
        if not (consent and _refused(exc)):
            raise _download_error(what, instead, exc) from exc
        raise DownloadError(
            f"{what}: access refused ({type(exc).__name__}: {str(exc)[:200]}). The model's licence "
            f"must be accepted once, with the account this notebook uses: open {consent}, accept "
            "its terms (on Kaggle: 'Request access' / the consent form), then run again. The "
            f"Internet is on (the request was answered); or {instead}."
        ) from exc


@contextlib.contextmanager
def parameter_for_a_copy(parameter: str, what: str = "a copy of it") -> Iterator[None]:
    """Say a failed download (:class:`DownloadError`) in a notebook's words: which of its
    parameters points at a local copy instead (the library's advice names its own call).

    >>> with parameter_for_a_copy("DATASET"):  # doctest: +NORMALIZE_WHITESPACE
    ...     raise DownloadError("could not download org/set (ConnectionError).")
    Traceback (most recent call last):
    ...
    tunixkit.runtime.DownloadError: could not download org/set (ConnectionError). In the notebook:
    attach a copy of it (a .jsonl/.json/.csv/.parquet file, or the data set's folder, e.g. as a
    Kaggle input) and set DATASET to its path.
    """
    try:
        yield
    except DownloadError as exc:
        raise DownloadError(
            f"{exc} In the notebook: attach {what} (a .jsonl/.json/.csv/.parquet file, or the data "
            f"set's folder, e.g. as a Kaggle input) and set {parameter} to its path."
        ) from exc


def _download_error(what: str, instead: str, exc: OSError) -> DownloadError:
    """The :class:`DownloadError` of a download that failed and was not refused."""
    if isinstance(exc, FileNotFoundError):  # the hub answered: no such repository, config, split
        return DownloadError(
            f"{what}: not found ({type(exc).__name__}: {str(exc)[:300]}). Check the id (and its "
            f"config and split); if the Internet is off, turn it on; or {instead}."
        )
    return DownloadError(
        f"could not download {what} ({type(exc).__name__}: {str(exc)[:300]}). Turn the "
        f"Internet on (Kaggle: Settings > Internet on; it needs a verified phone number), or "
        f"{instead}."
    )


class MissingSecretError(RuntimeError):
    """A credential the full profile needs is not configured anywhere."""


@functools.cache
def code_id() -> str:
    """The version and a digest of the installed package's files, e.g. ``0.3.0+1a2b3c4d5e6f``: what
    ``recipe.json`` records of the code that wrote a run. The same commit gives the same digest
    installed or editable; any change to the library gives another, version unchanged or not.

    >>> import re; bool(re.fullmatch(r"\\d+\\.\\d+\\.\\d+\\+[0-9a-f]{12}", code_id()))
    True
    """
    package = sys.modules[__package__]  # tunixkit itself, initialised before any of its modules
    root = pathlib.Path(package.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return f"{package.__version__}+{digest.hexdigest()[:12]}"


def cache_dir() -> pathlib.Path:
    """``$TUNIXKIT_CACHE`` or ``~/.cache/tunixkit``: where smoke and converted models go."""
    default = pathlib.Path.home() / ".cache" / "tunixkit"
    return pathlib.Path(os.environ.get("TUNIXKIT_CACHE", default))


def compilation_cache(folder: str | pathlib.Path | None) -> pathlib.Path | None:
    """Keep the XLA programs this process compiles in ``folder`` (JAX's persistent compilation
    cache) and reuse those already there: a resumed session (``RESUME_FROM`` copies the folder with
    the rest of OUTPUT_DIR) and the real run after its rehearsal load them instead of compiling the
    same shapes again. ``$JAX_COMPILATION_CACHE_DIR``, when set, wins (CI shares one folder between
    its processes); ``None``: off. Programs that compile in under a second are not kept unless
    ``$JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS`` says otherwise. Returns the folder in use."""
    import jax

    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return pathlib.Path(os.environ["JAX_COMPILATION_CACHE_DIR"])
    if folder is None:
        return None
    folder = pathlib.Path(folder).expanduser().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    return folder


def detect_environment() -> str:
    """Return ``"kaggle"``, ``"colab"`` or ``"local"``.

    >>> detect_environment() in ("kaggle", "colab", "local")
    True
    """
    if os.environ.get("KAGGLE_KERNEL_RUN_TYPE"):
        return "kaggle"
    if "google.colab" in sys.modules or os.environ.get("COLAB_RELEASE_TAG"):
        return "colab"
    return "local"


def detect_backend() -> str:
    """Return JAX's default backend: ``"tpu"``, ``"gpu"`` or ``"cpu"``."""
    import jax

    backend = jax.default_backend()
    return "gpu" if backend in ("gpu", "cuda", "rocm") else backend


@dataclasses.dataclass(frozen=True, kw_only=True)
class Runtime:
    """The resolved profile and the platform it runs on."""

    profile: str
    reason: str
    backend: str
    environment: str
    device_count: int
    process_count: int

    @property
    def smoke(self) -> bool:
        return self.profile == "smoke"

    def banner(self) -> str:
        """One readable block: profile and why, platform, devices."""
        hosts = f" on {self.process_count} hosts" if self.process_count > 1 else ""
        lines = [
            f"tunixkit profile: {self.profile.upper()}  ({self.reason})",
            f"platform: {self.backend} x {self.device_count}{hosts}, "
            f"environment: {self.environment}",
        ]
        width = max(len(line) for line in lines)
        bar = "=" * width
        return "\n".join([bar, *lines, bar])


def _check_profile(value: str, source: str) -> str:
    value = value.strip().lower()
    if value not in PROFILES:
        raise ValueError(
            f"Unknown profile {value!r} from {source}; expected one of {', '.join(PROFILES)}."
        )
    return value


def resolve(profile: str | None = None, *, verbose: bool = True) -> Runtime:
    """Resolve the profile (argument > ``$TUNIXKIT_PROFILE`` > automatic) and print a banner.

    >>> resolve("smoke", verbose=False).profile
    'smoke'
    >>> resolve("tiny", verbose=False)
    Traceback (most recent call last):
    ...
    ValueError: Unknown profile 'tiny' from the PROFILE argument; expected one of smoke, full.
    """
    import jax

    backend = detect_backend()
    if profile is not None:
        chosen = _check_profile(profile, "the PROFILE argument")
        reason = "set by the PROFILE parameter"
    elif os.environ.get(ENV_PROFILE):
        chosen = _check_profile(os.environ[ENV_PROFILE], f"${ENV_PROFILE}")
        reason = f"set by ${ENV_PROFILE}"
    else:
        chosen = "smoke" if backend == "cpu" else "full"
        reason = f"automatic: {backend} backend"
    rt = Runtime(
        profile=chosen,
        reason=reason,
        backend=backend,
        environment=detect_environment(),
        device_count=jax.device_count(),
        process_count=jax.process_count(),
    )
    if verbose:
        print(rt.banner())
    if reason.startswith("automatic") and backend == "cpu" and rt.environment != "local":
        warnings.warn(no_accelerator_message(rt.environment), stacklevel=2)
    return rt


def smoke_kit() -> types.ModuleType:
    """The smoke profile's models and data (:mod:`tunixkit.testing`): the one place where library
    code reaches them (the loader for the tiny ids, the smoke profile's data files). Imported on
    first use, so that the full profile never loads the test helpers."""
    import tunixkit.testing

    return tunixkit.testing


def no_accelerator_message(environment: str) -> str:
    """What to do when a Kaggle or Colab session has no accelerator (the automatic profile is then
    smoke: a tiny model, not the one you meant to train).

    >>> "TPU v5e-8" in no_accelerator_message("kaggle")
    True
    """
    where = {
        "kaggle": "Settings > Accelerator > TPU v5e-8 (and Internet on), then Save & Run All",
        "colab": "Runtime > Change runtime type > TPU, then run all cells again",
    }.get(environment, "a machine with a TPU or GPU")
    return (
        f"NO ACCELERATOR: this {environment} session runs on the CPU, so the automatic profile is "
        f"'smoke' (a tiny model and data, not the real run). Choose {where}; "
        "set PROFILE='smoke' to run the smoke profile on purpose."
    )


def mesh_shape(device_count: int) -> tuple[int, int]:
    """Default ``(fsdp, tp)`` shape for ``device_count`` devices.

    Pure FSDP: Gemma3 1B/270M have a single KV head, which tensor parallelism cannot split,
    and FSDP over 8 chips already fits them. Pass an explicit shape to :func:`make_mesh` for TP.

    >>> [mesh_shape(n) for n in (1, 4, 8)]
    [(1, 1), (4, 1), (8, 1)]
    """
    if device_count < 1:
        raise ValueError(f"device_count must be >= 1, got {device_count}")
    return (device_count, 1)


def make_mesh(
    shape: Sequence[int] | None = None,
    axis_names: Sequence[str] = MESH_AXES,
    *,
    devices: Sequence[Any] | None = None,
) -> Mesh:
    """Build a ``jax.sharding.Mesh`` over every device of every host (multi-host pods included),
    or over ``devices`` (a TPU slice's compile-only devices, say: ``tools.memplan --topology``).

    ``shape`` overrides the default from :func:`mesh_shape`; its product must equal the
    device count.
    """
    import jax

    n = len(devices) if devices is not None else jax.device_count()
    shape = tuple(shape) if shape is not None else mesh_shape(n)
    if len(shape) != len(axis_names):
        raise ValueError(f"mesh shape {shape} needs one size per axis {tuple(axis_names)}")
    if int(_prod(shape)) != n:
        raise ValueError(f"mesh shape {shape} has {_prod(shape)} slots but JAX sees {n} devices")
    return jax.make_mesh(
        shape,
        tuple(axis_names),
        axis_types=(jax.sharding.AxisType.Auto,) * len(shape),
        devices=devices,
    )


@contextlib.contextmanager
def mesh_context(mesh: Mesh) -> Iterator[Any]:
    """Activate ``mesh`` the way tunix 0.1.7's trainers read it (the legacy ``with mesh:``, which
    shards each batch over ``fsdp``; ``jax.set_mesh`` does not set what they read), quietly."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        mesh.__enter__()
    try:
        yield mesh
    finally:
        mesh.__exit__(None, None, None)


def peak_memory() -> tuple[int, str]:
    """(bytes, what was measured): the peak bytes in use on this process's first accelerator
    device, or on CPU the process's peak resident memory (model, data and JAX's own buffers
    together)."""
    import resource

    import jax

    stats = jax.local_devices()[0].memory_stats() or {}
    if "peak_bytes_in_use" in stats:
        return int(stats["peak_bytes_in_use"]), f"peak {jax.local_devices()[0].device_kind} memory"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "peak process RSS (CPU)"


def device_memory_limit() -> int | None:
    """The bytes this process's first accelerator device can hold (``bytes_limit`` of its memory
    stats), or None where the backend does not say (the CPU)."""
    import jax

    stats = jax.local_devices()[0].memory_stats() or {}
    return int(stats["bytes_limit"]) if "bytes_limit" in stats else None


def _prod(xs: Sequence[int]) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def _read_dotenv(path: pathlib.Path) -> dict[str, str]:
    out: dict[str, str] = {}
    if not path.is_file():
        return out
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        out[key.strip().removeprefix("export ").strip()] = value.strip().strip("'\"")
    return out


def _platform_secret(env: str, name: str) -> str | None:
    """A Kaggle or Colab secret, or None when it is not set. Any other failure of the secrets
    client (not attached to the notebook, no access granted, the client missing) is printed, so
    that it is not mistaken for "not set"; the lookup then goes on to the environment."""
    try:
        if env == "kaggle":
            from kaggle_secrets import UserSecretsClient  # type: ignore[import-not-found]

            return UserSecretsClient().get_secret(name) or None
        from google.colab import userdata  # type: ignore[import-not-found]

        return userdata.get(name) or None
    except Exception as e:  # noqa: BLE001 - each client raises its own types
        kind = type(e).__name__
        unset = kind == "SecretNotFoundError" or "no user secrets exist" in str(e).lower()
        if unset and not isinstance(e, ImportError):
            return None  # simply not set
        where = (
            "Kaggle: Add-ons > Secrets"
            if env == "kaggle"
            else "Colab: the key icon, notebook access on"
        )
        print(
            f"get_secret: the {env} secrets client failed for {name!r} ({kind}: {e}); "
            f"check {where}. Looking in the environment instead."
        )
        return None


def get_secret(name: str, *, purpose: str = "", required: bool = True) -> str | None:
    """Look a secret up in Kaggle secrets, Colab secrets, the environment, then ``./.env``.

    The value is returned, never printed or logged. When ``required`` and nothing is found, raise
    :class:`MissingSecretError` naming the secret and where to add it on Kaggle and on Colab.
    """
    env = detect_environment()
    value = _platform_secret(env, name) if env in ("kaggle", "colab") else None
    if value:
        return value
    value = os.environ.get(name) or _read_dotenv(pathlib.Path.cwd() / ".env").get(name)
    if value or not required:
        return value or None
    why = f" (needed for {purpose})" if purpose else ""
    raise MissingSecretError(
        f"Secret {name!r} is not set{why}.\n"
        f"  Kaggle: Add-ons > Secrets > Add a new secret named {name}, "
        "and tick it for this notebook.\n"
        f"  Colab:  the key icon in the left bar > Add new secret named {name}, "
        "with notebook access on.\n"
        f"  Elsewhere: export {name}=... or put {name}=... in a .env file in the working directory."
    )
