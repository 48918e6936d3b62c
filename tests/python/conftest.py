"""Shared pytest fixtures: the fovea binary (env FOVEA_BIN) and one demo checkpoint per test session."""
import os
import subprocess
import sys

import pytest

# The Python package as built next to the binary (build/python/fovea), when PYTHONPATH does not already have it.
_BUILT_PACKAGE = os.path.join(os.path.dirname(os.path.abspath(os.environ.get("FOVEA_BIN", "") or ".")), "python")
if os.path.isdir(os.path.join(_BUILT_PACKAGE, "fovea")) and _BUILT_PACKAGE not in sys.path:
    sys.path.insert(0, _BUILT_PACKAGE)


@pytest.fixture(scope="session")
def demo_model(tmp_path_factory):
    """`fovea make-demo-model` output, made once and shared (tests only read it)."""
    binary = os.environ.get("FOVEA_BIN", "")
    if not os.path.exists(binary):
        pytest.skip("FOVEA_BIN is not set to the fovea binary")
    model = tmp_path_factory.mktemp("model") / "demo"
    subprocess.run([binary, "make-demo-model", "--out", str(model)], check=True, capture_output=True, timeout=300)
    return model
