"""The judges' check: the judged model loaded and asked with tunix alone, as the judges would.

This file imports no tunixkit (``tests/test_judges_check.py`` runs it with tunixkit unimportable):
copy it into a submission as it is, or run it from a shell on a run's output::

    python judges_check.py /kaggle/working --system-prompt "..."

The judged model is ``<root>/ckpts/actor/<step>/model_params`` (the highest step; the path where the
competition's template writes its last checkpoint: ``/kaggle/working`` on Kaggle, else the run's
``OUTPUT_DIR``): the whole merged model, not LoRA adapters, with its ``tunix_config.json`` and
tokenizer beside it. :func:`check` loads it with tunix's own Gemma class and config and Orbax, and
tunix's sampler with the judges' decoding (temperature 1e-4, top-k 1, top-p 1, 768 steps, seed 42)
answers two prompts of every judged domain (:data:`JUDGED_PROMPTS`), with the notebook's system
prompt and again without one (the judges' own prompt may not carry it). It prints each answer's
length and whether it is in the ``<reasoning>``/``<answer>`` format, then the format rate both
ways, and writes them to ``<root>/judges_check.jsonl``. Notebooks 02 and 06 run it on their judged
model.
"""

import importlib
import json
import pathlib
import re

import jax.numpy as jnp
import orbax.checkpoint as ocp
from flax import nnx
from tunix.generate import sampler as sampler_lib

JUDGED_PROMPTS = [  # (domain, prompt): two per judged domain
    ("creative writing", "Write a short poem about a lighthouse keeper's last night on duty."),
    ("creative writing", "Tell a 150-word story in which a lost umbrella changes someone's day."),
    ("ideation", "Suggest three ways a small town library could attract more teenagers."),
    ("ideation", "Give five names for a bakery that only sells bread made from old grains."),
    (
        "summarization",
        "Summarize in one sentence: The city council voted on Tuesday to turn the old rail yard "
        "into a park with a playground, a community garden and a bike path; work starts in "
        "spring and is paid for by a state grant.",
    ),
    (
        "summarization",
        "Summarize for a ten-year-old: Bees carry pollen from flower to flower. This lets plants "
        "make seeds and fruit. Without bees, many of the foods people eat would be rare.",
    ),
    ("science", "Why does ice float on liquid water?"),
    ("science", "What causes the seasons on Earth?"),
    ("math", "A train travels 60 km in 45 minutes. What is its average speed in km/h?"),
    ("math", "What is the sum of the first 20 odd numbers?"),
    ("code", "Write a Python function that returns the n-th Fibonacci number."),
    ("code", "Write a Python function that checks whether a string is a palindrome."),
]


def load_judged(folder):
    """The model in ``folder`` (``ckpts/actor/<step>``), with tunix's own class and config."""
    meta = json.loads((folder / "tunix_config.json").read_text())
    arch = importlib.import_module(meta["module"])  # tunix.models.gemma3.model (or .gemma.model)
    if meta["preset"]:  # a released size, e.g. ModelConfig.gemma3_1b_it()
        config = getattr(arch.ModelConfig, meta["preset"])()
    else:  # a custom (smoke) size: the config's fields as written (enums and dtypes by name)

        def value(v):
            if isinstance(v, dict):
                return getattr(arch, v["enum"])[v["name"]]
            return tuple(value(x) for x in v) if isinstance(v, list) else v

        fields = {k: value(v) for k, v in meta["config"].items()}
        if "param_dtype" in fields:  # Gemma3 has one, Gemma2 not
            fields["param_dtype"] = jnp.dtype(fields["param_dtype"])
        config = arch.ModelConfig(**fields)
    model_class = getattr(arch, meta["model_class"])
    graph, state = nnx.split(nnx.eval_shape(lambda: model_class(config, rngs=nnx.Rngs(0))))
    model = nnx.merge(graph, ocp.StandardCheckpointer().restore(folder / "model_params", state))
    return model, config


def check(root, system_prompt=None):
    """Answer ``JUDGED_PROMPTS`` with the judged model in ``root/ckpts/actor`` (on Kaggle
    ``/kaggle/working``) and the judges' decoding, with ``system_prompt`` and (if there is one)
    without it, written to ``root/judges_check.jsonl``; returns (its answers, its folder), or
    ([], None) when there is none yet."""
    actor = pathlib.Path(root) / "ckpts" / "actor"
    steps = sorted((p for p in actor.glob("*") if p.name.isdigit()), key=lambda p: int(p.name))
    if not steps:
        print(f"no judged model in {actor} yet: nothing finished training")
        return [], None
    folder = steps[-1]
    model, config = load_judged(folder)
    if (folder / "tokenizer.model").is_file():  # SentencePiece (Gemma's own)
        import sentencepiece as spm

        tok = spm.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
        stop = [tok.eos_id(), tok.PieceToId("<end_of_turn>")]
    else:  # a Hugging Face tokenizer.json
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(folder)
        stop = [tok.eos_token_id, tok.convert_tokens_to_ids("<end_of_turn>")]
    cache = sampler_lib.CacheConfig(
        cache_size=2048,  # the longest prompt and 768 generated tokens
        num_layers=config.num_layers,
        num_kv_heads=config.num_kv_heads,
        head_dim=config.head_dim,
    )
    sampler = sampler_lib.Sampler(model, tok, cache)
    form = re.compile(r"<reasoning>.+</reasoning>\s*<answer>.+</answer>", re.DOTALL)
    answers = []
    for system in [system_prompt, None] if system_prompt else [None]:
        turns = [f"{system}\n\n{p}" if system else p for _, p in JUDGED_PROMPTS]
        out = sampler(
            [f"<start_of_turn>user\n{t}<end_of_turn>\n<start_of_turn>model\n" for t in turns],
            max_generation_steps=768,
            temperature=1e-4,
            top_k=1,
            top_p=1.0,
            seed=42,
            eos_tokens=stop,
        )
        for (domain, prompt), text, tokens in zip(
            JUDGED_PROMPTS, out.text, out.tokens, strict=True
        ):
            ok = bool(form.search(text))
            answers.append(
                {
                    "domain": domain,
                    "prompt": prompt,
                    "system_prompt": bool(system),
                    "answer": text,
                    "tokens": len(tokens),
                    "format": ok,
                }
            )
            way = "" if system else ", no system prompt"
            print(
                f"--- {domain}{way}: {len(tokens)} tokens, format {'ok' if ok else 'NOT followed'}"
            )
            print(text[:600])
    for system in sorted({a["system_prompt"] for a in answers}, reverse=True):
        rows = [a for a in answers if a["system_prompt"] == system]
        way = "with the system prompt" if system else "without a system prompt"
        print(f"format {way}: {sum(a['format'] for a in rows)} of {len(rows)} answers")
    with open(pathlib.Path(root) / "judges_check.jsonl", "w") as f:
        f.writelines(json.dumps(a) + "\n" for a in answers)
    print(f"the judged model: {(folder / 'model_params').resolve()}")
    return answers, folder  # the model is freed: the device memory is the run's


def answered(answers):
    """Whether ``answers`` (:func:`check`'s) hold a non-empty answer to every judged prompt, each
    way it was asked (with the system prompt, without)."""
    ways = {a["system_prompt"] for a in answers}
    asked = [{(a["domain"], a["prompt"]) for a in answers if a["system_prompt"] == w} for w in ways]
    full = bool(ways) and all(prompts == set(JUDGED_PROMPTS) for prompts in asked)
    return full and all(a["answer"].strip() for a in answers)


def main(argv=None):
    """``python judges_check.py ROOT [--system-prompt TEXT]``: :func:`check` from a shell."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", help="the folder that holds ckpts/actor/<step>/model_params")
    parser.add_argument("--system-prompt", default=None, help="asked with it, then without")
    args = parser.parse_args(argv)
    _, folder = check(args.root, args.system_prompt)
    return 0 if folder is not None else 1


if __name__ == "__main__":
    raise SystemExit(main())
