"""Shared pytest fixtures: the fovea binary (env FOVEA_BIN) and one demo checkpoint per test session."""
import os
import shutil
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


@pytest.fixture
def self_signed_cert(tmp_path):
    """(cert.pem, key.pem) for 127.0.0.1, made with openssl for this test: HTTPS servers on loopback that the
    product trusts only through its --ca-file option."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


@pytest.fixture
def https_server(tmp_path, self_signed_cert):
    """HTTPS on loopback serving tmp_path/www (remote_servers.https_server): (base URL, www, cert)."""
    import remote_servers
    with remote_servers.https_server(tmp_path, self_signed_cert) as server:
        yield server


@pytest.fixture
def s3_server():
    """moto on loopback with SigV4 checks (remote_servers.s3_server): (endpoint, s3 client, iam client)."""
    boto3 = pytest.importorskip("boto3")
    if shutil.which("moto_server") is None:
        pytest.skip("moto[server] is not installed")
    import remote_servers
    with remote_servers.s3_server(boto3) as server:
        yield server
