"""Shared pytest fixtures: the fovea binary (env FOVEA_BIN) and one demo checkpoint per test session."""
import os
import subprocess

import pytest


@pytest.fixture(scope="session")
def demo_model(tmp_path_factory):
    """`fovea make-demo-model` output, made once and shared (tests only read it)."""
    binary = os.environ.get("FOVEA_BIN", "")
    if not os.path.exists(binary):
        pytest.skip("FOVEA_BIN is not set to the fovea binary")
    model = tmp_path_factory.mktemp("model") / "demo"
    subprocess.run([binary, "make-demo-model", "--out", str(model)], check=True, capture_output=True, timeout=300)
    return model
