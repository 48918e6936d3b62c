"""The Python API with images behind URLs (https with a self-signed certificate, S3 through moto with SigV4
checks, a 404) and with `choices`: a URL image answers exactly as the same file read from disk, a failed download
fails only its own Result, and a choices request returns every choice's total log-probability with the most
likely one as its text."""
import json
import math
import shutil

import pytest

from remote_servers import BUCKET

fovea = pytest.importorskip("fovea")
Image = pytest.importorskip("PIL.Image")


@pytest.fixture(scope="module")
def llm(demo_model):
    with fovea.Engine(demo_model, backend="cpu", max_tiles=1, kv_blocks=512) as engine:
        yield engine


def serve_image(tmp_path, www, s3, iam, key, size, monkeypatch):
    """A PNG at tmp_path/img.png, www/img.png and s3://BUCKET/key, and AWS_* keys of an IAM user who may read it."""
    png = tmp_path / "img.png"
    Image.new("RGB", size, (30, 160, 90)).save(png)
    shutil.copy(png, www / "img.png")
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key=key, Body=png.read_bytes())
    user = key.split("/")[0] + "-reader"
    iam.create_user(UserName=user)
    creds = iam.create_access_key(UserName=user)["AccessKey"]
    iam.put_user_policy(UserName=user, PolicyName="read", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", creds["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", creds["SecretAccessKey"])
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return png


def test_url_images_through_the_python_api(llm, tmp_path, https_server, s3_server, monkeypatch):
    base, www, cert = https_server
    endpoint, s3, iam = s3_server
    png = serve_image(tmp_path, www, s3, iam, "py/img.png", (96, 64), monkeypatch)
    monkeypatch.setenv("FOVEA_CA_BUNDLE", str(cert))
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)

    images = [str(png), f"{base}/img.png", f"s3://{BUCKET}/py/img.png", f"{base}/missing.png"]
    out = llm.generate([fovea.Request(image=i, prompt="What is it?", max_tokens=3, answers=["yes", "no"])
                        for i in images])
    local, https, s3_result, missing = out
    assert local.error is None, local.error
    for remote in (https, s3_result):
        assert remote.error is None, remote.error
        assert remote.tokens == local.tokens and remote.answer_logprobs == local.answer_logprobs
    assert missing.error is not None and "missing.png" in missing.error and "404" in missing.error


def test_choices_through_the_python_api(llm, tmp_path):
    png = tmp_path / "c.png"
    Image.new("RGB", (64, 64), (120, 20, 200)).save(png)
    choices = ["yes", "no", "not visible"]
    result, = llm.generate([fovea.Request(image=str(png), prompt="Is there a bed?", choices=choices)])
    assert result.error is None, result.error
    assert set(result.choice_logprobs) == set(choices)
    assert all(math.isfinite(v) and v <= 0 for v in result.choice_logprobs.values())
    assert result.text == max(choices, key=result.choice_logprobs.get)


def test_fetch_options_as_engine_arguments(demo_model, tmp_path, https_server, s3_server, monkeypatch):
    """ca_file and s3_endpoint given to the Engine (no FOVEA_CA_BUNDLE, no AWS_ENDPOINT_URL) reach both image=
    URLs and the image_url parts of messages= (https and s3://, downloaded ahead of the engine)."""
    base, www, cert = https_server
    endpoint, s3, iam = s3_server
    png = serve_image(tmp_path, www, s3, iam, "opt/img.png", (80, 60), monkeypatch)
    for name in ("FOVEA_CA_BUNDLE", "CURL_CA_BUNDLE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)

    def chat(url):
        return fovea.Request(messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "What is it?"}]}],
            max_tokens=3, answers=["yes", "no"])

    urls = [f"{base}/img.png", f"s3://{BUCKET}/opt/img.png"]
    with fovea.Engine(demo_model, backend="cpu", max_tiles=1, kv_blocks=512, ca_file=str(cert), s3_endpoint=endpoint,
                      fetch_timeout=20, fetch_retries=1, prefetch=4, fetch_parallel=2) as llm:
        local, = llm.generate([fovea.Request(image=str(png), prompt="What is it?", max_tokens=3,
                                             answers=["yes", "no"])])
        remote = llm.generate([fovea.Request(image=u, prompt="What is it?", max_tokens=3, answers=["yes", "no"])
                               for u in urls] + [chat(u) for u in urls])
    assert local.error is None, local.error
    for result in remote:
        assert result.error is None, result.error
        assert result.tokens == local.tokens and result.answer_logprobs == local.answer_logprobs
    # Without the CA file the self-signed server is refused: the argument, not the environment, made it work.
    with fovea.Engine(demo_model, backend="cpu", max_tiles=1, kv_blocks=512, fetch_retries=0) as plain:
        refused, = plain.generate([chat(urls[0])])
    assert refused.error is not None and refused.error_kind == "invalid_image"  # a download that failed
