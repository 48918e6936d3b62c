"""`fovea run` with URL images, against servers this test starts on loopback: HTTPS with a self-signed certificate
(trusted through --ca-file), an S3-compatible store (moto, checking SigV4 signatures), a 404, a server that never
answers (timeout), a 503 then 200 (retried), a body over the limit, a wrong secret key and an untrusted
certificate. Each failure fails its own task with a message naming the URL; the others are answered exactly as
the same image read from a local file."""
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest
from remote_servers import BUCKET, Handler

Image = pytest.importorskip("PIL.Image")
boto3 = pytest.importorskip("boto3")
FOVEA_BIN = os.environ.get("FOVEA_BIN", "")
pytestmark = [pytest.mark.skipif(not os.path.exists(FOVEA_BIN), reason="FOVEA_BIN is not set to the fovea binary"),
              pytest.mark.skipif(shutil.which("moto_server") is None, reason="moto[server] is not installed")]


def run_tasks(model, tmp_path, name, tasks, extra, env):
    (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    out = tmp_path / f"{name}-results.jsonl"
    start = time.time()
    r = subprocess.run([FOVEA_BIN, "run", "--model", str(model), "--input", str(tmp_path / f"{name}.jsonl"),
                        "--output", str(out), "--backend", "cpu", "--max-tiles", "1", "--kv-blocks", "512",
                        "--quiet", *extra], capture_output=True, text=True, timeout=300, env=env)
    print(name, f"{time.time() - start:.1f} s", r.stderr[-2000:])
    return r, {str(rec["id"]): rec for rec in map(json.loads, out.read_text().splitlines())}


def test_url_images_in_fovea_run(demo_model, tmp_path, https_server, s3_server):
    base, www, cert = https_server
    endpoint, s3, iam = s3_server
    png = tmp_path / "img.png"
    Image.new("RGB", (96, 64), (200, 40, 90)).save(png)
    shutil.copy(png, www / "img.png")
    (www / "big.png").write_bytes(png.read_bytes() + os.urandom(300_000))  # over --max-image-bytes: never decoded
    s3.create_bucket(Bucket=BUCKET)
    # A space in the key checks its percent-encoding. (Not "+": moto, through werkzeug, signs it unencoded where
    # AWS and botocore encode it as %2B, as we do.)
    s3.put_object(Bucket=BUCKET, Key="dir/img one.png", Body=png.read_bytes())
    iam.create_user(UserName="reader")
    creds = iam.create_access_key(UserName="reader")["AccessKey"]
    iam.put_user_policy(UserName="reader", PolicyName="read", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))

    silent = socket.socket()  # accepts connections (backlog) and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    never = f"http://127.0.0.1:{silent.getsockname()[1]}/x.png"

    q = {"prompt": "Colour?", "answers": ["red", "blue"], "max_tokens": 2}
    tasks = [dict(id="local", image=str(png), **q), dict(id="https", image=f"{base}/img.png", **q),
             dict(id="flaky", image=f"{base}/flaky.png", **q),
             dict(id="s3", image=f"s3://{BUCKET}/dir/img one.png", **q),
             dict(id="s3-missing", image=f"s3://{BUCKET}/none.png", **q),
             dict(id="404", image=f"{base}/missing.png?sig=SECRET", **q), dict(id="timeout", image=never, **q),
             dict(id="big", image=f"{base}/big.png", **q)]
    home = tmp_path / "home"  # no ~/.aws of the machine's user
    env = dict(os.environ, HOME=str(home), AWS_ACCESS_KEY_ID=creds["AccessKeyId"],
               AWS_SECRET_ACCESS_KEY=creds["SecretAccessKey"], AWS_REGION="us-east-1", AWS_ENDPOINT_URL=endpoint)
    for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "FOVEA_CA_BUNDLE", "CURL_CA_BUNDLE"):
        env.pop(k, None)
    r, by_id = run_tasks(demo_model, tmp_path, "ok", tasks,
                         ["--ca-file", str(cert), "--fetch-timeout", "1", "--fetch-retries", "1",
                          "--max-image-bytes", "200000", "--prefetch", "4", "--fetch-parallel", "1"], env)
    silent.close()
    assert r.returncode == 1, r.stderr  # some tasks failed
    assert sorted(by_id) == sorted(t["id"] for t in tasks)
    local = by_id["local"]
    assert "error" not in local, local
    for ok in ("https", "flaky", "s3"):  # the same bytes: the same answer, to the last bit of the log-probs
        assert "error" not in by_id[ok], by_id[ok]
        assert by_id[ok]["tokens"] == local["tokens"] and by_id[ok]["logprobs"] == local["logprobs"], ok
    assert "HTTP 404" in by_id["404"]["error"] and f"{base}/missing.png?..." in by_id["404"]["error"]
    assert "SECRET" not in r.stderr and "SECRET" not in json.dumps(by_id)
    assert "HTTP 404 NoSuchKey" in by_id["s3-missing"]["error"] and "none.png" in by_id["s3-missing"]["error"]
    assert "timed out" in by_id["timeout"]["error"] and never in by_id["timeout"]["error"]
    assert "(after 2 attempts)" in by_id["timeout"]["error"]
    assert "larger than the limit of 200000 bytes" in by_id["big"]["error"]
    # One download thread, one libcurl handle: its connection is reused until an error answer or the aborted
    # oversize body closes it (img, 503 | flaky, 404 | big: 5 requests on 3 connections).
    assert Handler.requests == 5 and Handler.connections == 3, (Handler.requests, Handler.connections)

    # The signature is checked: a wrong secret is refused (403, not retried); TLS is verified by default.
    env["AWS_SECRET_ACCESS_KEY"] = "wrong" + creds["SecretAccessKey"]
    r, by_id = run_tasks(demo_model, tmp_path, "refused", tasks[1:2] + tasks[3:4], ["--fetch-retries", "1"], env)
    assert r.returncode == 1
    assert "HTTP 403 SignatureDoesNotMatch" in by_id["s3"]["error"], by_id["s3"]
    assert "(after" not in by_id["s3"]["error"]
    assert "certificate" in by_id["https"]["error"] and base in by_id["https"]["error"], by_id["https"]
    assert creds["SecretAccessKey"] not in r.stderr + json.dumps(by_id)


def test_s3_temporary_credentials(demo_model, tmp_path, s3_server):
    """Temporary credentials reach moto's signature and session-token checks: an assumed role's keys with
    AWS_SESSION_TOKEN (the x-amz-security-token header), a wrong session token (refused), and a web identity
    (EKS IRSA: AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN) exchanged by fovea itself through moto's STS
    AssumeRoleWithWebIdentity. Unsigned except for that one call, every request is checked."""
    endpoint, s3, iam = s3_server
    png = tmp_path / "img.png"
    Image.new("RGB", (64, 48), (20, 160, 90)).save(png)
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="img.png", Body=png.read_bytes())
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Federated": "oidc"},
                                                     "Action": "sts:AssumeRoleWithWebIdentity"}]}
    role = iam.create_role(RoleName="reader", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    iam.put_role_policy(RoleName="reader", PolicyName="read", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
    sts = boto3.client("sts", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="setup",
                       aws_secret_access_key="setup")
    temp = sts.assume_role(RoleArn=role, RoleSessionName="env-path")["Credentials"]  # the 5th set-up call
    assert temp["AccessKeyId"].startswith("ASIA")

    q = {"prompt": "Colour?", "answers": ["red", "green"], "max_tokens": 2}
    tasks = [dict(id="local", image=str(png), **q), dict(id="s3", image=f"s3://{BUCKET}/img.png", **q)]
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    base_env.update(HOME=str(tmp_path / "home"), AWS_REGION="us-east-1", AWS_ENDPOINT_URL=endpoint,
                    AWS_EC2_METADATA_DISABLED="true")
    session = dict(base_env, AWS_ACCESS_KEY_ID=temp["AccessKeyId"], AWS_SECRET_ACCESS_KEY=temp["SecretAccessKey"],
                   AWS_SESSION_TOKEN=temp["SessionToken"])
    r, by_id = run_tasks(demo_model, tmp_path, "session", tasks, ["--fetch-retries", "0"], session)
    assert r.returncode == 0, r.stderr
    assert by_id["s3"]["logprobs"] == by_id["local"]["logprobs"], by_id["s3"]

    r, by_id = run_tasks(demo_model, tmp_path, "wrong-token", tasks[1:], ["--fetch-retries", "0"],
                         dict(session, AWS_SESSION_TOKEN="not" + temp["SessionToken"]))
    assert r.returncode == 1
    assert "HTTP 400 InvalidToken" in by_id["s3"]["error"], by_id["s3"]  # as AWS answers a bad token
    assert temp["SessionToken"] not in r.stderr + json.dumps(by_id)

    token_file = tmp_path / "web-identity-token"
    token_file.write_text("eyJhbGciOiJSUzI1NiJ9.e30.c2lnbmF0dXJl\n")  # moto does not check the token itself
    web = dict(base_env, AWS_WEB_IDENTITY_TOKEN_FILE=str(token_file), AWS_ROLE_ARN=role,
               AWS_ROLE_SESSION_NAME="fovea-test")
    # moto checks signatures on everything but its first N requests; AssumeRoleWithWebIdentity is unsigned by
    # design (the token is the proof), which moto does not exempt: let exactly that one request through.
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset-auth", data=b"1", method="POST",
                                                  headers={"Content-Type": "text/plain"}))
    r, by_id = run_tasks(demo_model, tmp_path, "web-identity", tasks, ["--fetch-retries", "0"], web)
    assert r.returncode == 0, r.stderr
    assert by_id["s3"]["logprobs"] == by_id["local"]["logprobs"], by_id["s3"]

    # A role STS refuses (moto: the request is now checked, and unsigned) fails the task, naming the source.
    r, by_id = run_tasks(demo_model, tmp_path, "web-refused", tasks[1:], ["--fetch-retries", "0"], web)
    assert r.returncode == 1
    assert "web identity" in by_id["s3"]["error"], by_id["s3"]
    assert "eyJhbGci" not in r.stderr + json.dumps(by_id)
