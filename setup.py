"""setuptools' entry; pyproject.toml describes the project. With GPU_ADMISSION_COMPILE=1 the engine
(policies/) is compiled with mypyc (tools/compile_engine.py), as the image is built:

    pip install -c constraints.txt 'setuptools>=70.1' mypy types-PyYAML  # mypyc type-checks as CI does
    GPU_ADMISSION_COMPILE=1 pip install --no-build-isolation -c constraints.txt .

Never for an editable install: compiled modules beside the sources would shadow every edit.
"""

import os
import sys
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent


def ext_modules() -> list[object]:
    if os.environ.get("GPU_ADMISSION_COMPILE") != "1":
        return []
    if sys.argv[1:2] in (["egg_info"], ["dist_info"]):  # metadata only: nothing to compile yet
        return []
    if "editable_wheel" in sys.argv:
        raise SystemExit(
            "GPU_ADMISSION_COMPILE=1 builds a wheel, not an editable install (the modules would shadow the source)"
        )
    sys.path.insert(0, str(HERE))
    from tools.compile_engine import extensions

    return extensions(HERE)


setup(ext_modules=ext_modules())
