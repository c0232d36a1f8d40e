"""The notebooks' install cell ends here: run in the notebook's own kernel (``runpy.run_path``) from
the repository it checked out, this installs tunixkit into that Python with the setup script, then
puts the folders the install wrote to on ``sys.path``, so that the running kernel imports tunixkit
without a restart (a user site created by the install is not on the path of a kernel started before
it)."""

import importlib
import os
import site
import subprocess
import sys
import sysconfig

setup = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "setup_notebook_tpu_single_host.sh"
)
subprocess.run(["bash", setup, "--kernel", sys.executable], check=True)
for folder in (sysconfig.get_paths()["purelib"], site.getusersitepackages()):
    if os.path.isdir(folder) and folder not in sys.path:
        site.addsitedir(folder)
importlib.invalidate_caches()
