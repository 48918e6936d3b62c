"""bench/gpu/peer_files.py: the tokenizer.json built for vLLM/LMDeploy from InternLM2's tokenizer.model (read as a
protobuf, not loaded with SentencePieceProcessor, which newer sentencepiece refuses for its NUL piece), the
atomic writes that never leave a partial file, and make_model.py carrying on without the peer files."""
import json
import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench", "gpu"))
import common  # noqa: E402
import make_model  # noqa: E402
import peer_files  # noqa: E402
import sentencepiece_proto  # noqa: E402
import tokenizer_vectors  # noqa: E402

SHARED = os.environ.get("FOVEA_SHARED_DATA", os.path.join(REPO, "..", "shared", "data"))  # a worktree: set it
TOKENIZERS = os.path.join(SHARED, "tokenizers")
INTERNLM2 = os.path.join(TOKENIZERS, "internlm2", "tokenizer.model")
needs_shared = pytest.mark.skipif(not os.path.isfile(INTERNLM2), reason="no ../shared internlm2 tokenizer")
FOVEA = os.environ.get("FOVEA_BIN", "")
NUL_PIECE = 354  # InternLM2's piece "\x00" (a NORMAL piece)


def read_vectors(name):
    """All the InternLM2 test vectors (texts and the ids InternLM2's reference tokenizer gives, no BOS)."""
    vectors = tokenizer_vectors.read_vectors(TOKENIZERS, name)
    assert len(vectors) > 10
    return vectors


@pytest.fixture(scope="module")
def peer_tokenizer():
    tokenizers = pytest.importorskip("tokenizers")
    if not os.path.isfile(INTERNLM2):
        pytest.skip("no ../shared internlm2 tokenizer")
    tokens = dict(make_model.INTERNLM2_ADDED, **{"<video>": peer_files.VIDEO_TOKEN_ID})
    return tokenizers.Tokenizer.from_str(peer_files.build_tokenizer_json(INTERNLM2, tokens))


@needs_shared
def test_proto_reader_equals_the_sentencepiece_proto_module():
    """The outside oracle: sentencepiece's own generated protobuf module (parsing only, no processor)."""
    try:
        from sentencepiece import sentencepiece_model_pb2 as pb
    except Exception as e:  # noqa: BLE001 - a protobuf runtime too old/new for the generated module
        pytest.skip(f"sentencepiece's proto module does not import: {e}")
    proto = pb.ModelProto()
    with open(INTERNLM2, "rb") as f:
        proto.ParseFromString(f.read())
    model = sentencepiece_proto.read_model(INTERNLM2)
    assert model["pieces"] == [(p.piece, p.score, p.type) for p in proto.pieces]
    assert model["pieces"][NUL_PIECE] == ("\x00", proto.pieces[NUL_PIECE].score, sentencepiece_proto.NORMAL)
    assert (model["model_type"], model["byte_fallback"], model["unk_id"]) == (
        proto.trainer_spec.model_type, proto.trainer_spec.byte_fallback, proto.trainer_spec.unk_id)
    n = proto.normalizer_spec
    assert (model["normalizer_name"], model["precompiled_charsmap"], model["add_dummy_prefix"],
            model["remove_extra_whitespaces"]) == (n.name, n.precompiled_charsmap, n.add_dummy_prefix,
                                                   n.remove_extra_whitespaces)


def test_proto_reader_defaults_and_bad_input(tmp_path):
    # One piece without score/type fields, an empty trainer spec: NORMAL, UNIGRAM, dummy prefix on (proto defaults).
    piece = b"\x0a\x01a"
    path = tmp_path / "tokenizer.model"
    path.write_bytes(b"\x0a" + bytes([len(piece)]) + piece + b"\x12\x00")
    model = sentencepiece_proto.read_model(str(path))
    assert model["pieces"] == [("a", 0.0, sentencepiece_proto.NORMAL)]
    assert model["model_type"] == sentencepiece_proto.UNIGRAM and model["add_dummy_prefix"]
    with pytest.raises(ValueError, match="model type 1 is not BPE.*dummy prefix.*removes extra whitespace"):
        peer_files.check_convertible(model, "x.model")
    for bad, message in [(b"\x0a\x05ab", "runs past the end"), (b"\x0a", "truncated varint"),
                         (b"\x0b", "unsupported wire type 3"), (b"", "holds no pieces")]:
        path.write_bytes(bad)
        with pytest.raises(sentencepiece_proto.ProtoError, match=message):
            sentencepiece_proto.read_model(str(path))


@needs_shared
def test_tokenizer_json_gives_the_internlm2_vectors(peer_tokenizer):
    for text, ids in read_vectors("internlm2"):
        assert peer_tokenizer.encode(text, add_special_tokens=False).ids == ids, repr(text)
        assert peer_tokenizer.encode(text).ids == [1] + ids  # BOS from the post-processor
        assert peer_tokenizer.decode(ids) == text, repr(text)


@needs_shared
def test_tokenizer_json_equals_sentencepiece_where_it_loads(peer_tokenizer):
    """The processor itself as the oracle where this sentencepiece still loads InternLM2's model (0.2.3 does, with
    a warning that it treats the NUL piece as UNUSED); the GPU machine's newer one refuses it."""
    sentencepiece = pytest.importorskip("sentencepiece")
    try:
        sp = sentencepiece.SentencePieceProcessor(model_file=INTERNLM2)
    except RuntimeError as e:
        pytest.skip(f"this sentencepiece refuses the model: {e}")
    texts = [text for text, _ in read_vectors("internlm2")] + ["Hello world", "  x\n\ny 中文 😀 \x01 tab\there"]
    for text in texts:
        assert peer_tokenizer.encode(text, add_special_tokens=False).ids == sp.encode(text), repr(text)


@needs_shared
def test_nul_character_maps_to_the_nul_piece_as_fovea_does(peer_tokenizer):
    assert peer_tokenizer.encode("a\x00b", add_special_tokens=False).ids == [264, NUL_PIECE, 260]
    assert peer_tokenizer.decode([264, NUL_PIECE, 260]) == "a\x00b"
    if FOVEA and os.path.exists(FOVEA):
        out = subprocess.run([FOVEA, "tokenize", "--tokenizer", INTERNLM2], input=b"a\x00b", capture_output=True,
                             check=True, timeout=60).stdout
        assert [int(x) for x in out.split()] == [264, NUL_PIECE, 260]


@needs_shared
def test_built_where_sentencepiece_refuses_the_model(monkeypatch, peer_tokenizer):
    """The GPU machine's sentencepiece raises on loading InternLM2's model: the build must not load it."""
    sentencepiece = pytest.importorskip("sentencepiece")

    def refuses(*args, **kwargs):
        raise RuntimeError("INTERNAL: piece must not include null character.")
    monkeypatch.setattr(sentencepiece, "SentencePieceProcessor", refuses)
    tokens = dict(make_model.INTERNLM2_ADDED, **{"<video>": peer_files.VIDEO_TOKEN_ID})
    assert peer_files.build_tokenizer_json(INTERNLM2, tokens) == peer_tokenizer.to_str(pretty=False)


@needs_shared
def test_image_and_video_tokens_are_single_special_tokens(peer_tokenizer):
    ids = peer_tokenizer.encode("<img><IMG_CONTEXT></img><video>", add_special_tokens=False).ids
    assert ids == [make_model.INTERNLM2_ADDED["<img>"], make_model.INTERNLM2_ADDED["<IMG_CONTEXT>"],
                   make_model.INTERNLM2_ADDED["</img>"], peer_files.VIDEO_TOKEN_ID]


def test_replace_atomically_keeps_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text("old", encoding="utf-8")

    def fails_halfway(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("{\"half")
        raise RuntimeError("INTERNAL: piece must not include null character.")
    with pytest.raises(RuntimeError):
        common.replace_atomically(str(path), fails_halfway)
    assert path.read_text(encoding="utf-8") == "old"
    assert os.listdir(tmp_path) == ["tokenizer.json"]  # no temporary file left
    common.write_text(str(path), "new")
    common.copy_file(str(path), str(tmp_path / "copy.json"))
    assert (tmp_path / "copy.json").read_text(encoding="utf-8") == "new"


def config_only_model(tmp_path, tokenizer):
    out = tmp_path / "model"
    subprocess.run([sys.executable, os.path.join(REPO, "bench", "gpu", "make_model.py"), "--out", str(out),
                    "--config-only", "--tokenizer", str(tokenizer)], check=True, capture_output=True, timeout=300)
    return out


def test_a_failed_tokenizer_json_leaves_none_and_the_model_is_still_made(tmp_path):
    """The GPU machine's failure: the tokenizer.json cannot be built. make_model.py logs it, writes no
    tokenizer.json (an empty one broke `fovea run`), and still writes Fovea's files and model.json."""
    bad = tmp_path / "bad.model"
    bad.write_bytes(b"\x0a\x05ab")  # a truncated ModelProto
    out = config_only_model(tmp_path, bad)
    names = sorted(os.listdir(out))
    assert "tokenizer.json" not in names and not [n for n in names if ".tmp" in n], names
    assert {"config.json", "tokenizer.model", "tokenizer_config.json", "added_tokens.json", "model.json"} <= set(names)
    assert json.loads((out / "model.json").read_text())["peer_files"] is False
    # peers.sh's retry: one line saying why, still no tokenizer.json; the peers record it (status, log_tail).
    retry = subprocess.run([sys.executable, os.path.join(REPO, "bench", "gpu", "peer_files.py"), "--model", str(out)],
                           capture_output=True, text=True, timeout=120)
    assert retry.returncode == 1 and not (out / "tokenizer.json").exists()
    assert retry.stderr.strip().splitlines()[-1] == "error: peer files: not written (ProtoError: field 1 runs past " \
                                                    "the end of its message)", retry.stderr
    import peers
    peers.main(["--engines", "lmdeploy,vllm", "--work", str(tmp_path), "--out", str(tmp_path / "out"),
                "--peer-files-error", retry.stderr.strip()])
    runs = json.loads((tmp_path / "peers.json").read_text())["runs"]
    assert sorted(runs) == ["lmdeploy/bf16", "lmdeploy/fp8", "vllm/bf16", "vllm/fp8"]
    assert {r["status"] for r in runs.values()} == {"no peer files"}
    assert "ProtoError" in runs["vllm/bf16"]["log_tail"]


@needs_shared
def test_config_only_model_gets_a_valid_tokenizer_json(tmp_path):
    pytest.importorskip("tokenizers")
    out = config_only_model(tmp_path, INTERNLM2)
    assert json.loads((out / "model.json").read_text())["peer_files"] is True
    doc = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
    assert doc["model"]["vocab"]["\x00"] == NUL_PIECE
    assert not [n for n in os.listdir(out) if ".tmp" in n]


def fovea_module():
    try:
        import fovea
        return fovea
    except ImportError:
        pytest.skip("the fovea Python module is not on PYTHONPATH")


def tiny_model(out):
    """make_model.py --tiny's checkpoint with its peer files; with torch its random weights, without torch its
    config and tokenizer files only (the prompt ids do not depend on the weights: run with load_format dummy)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        pytest.importorskip("transformers")
        os.makedirs(out)
        make_model.build_config("internlm2", True, 0.02).save_pretrained(str(out))
        make_model.write_tokenizer(str(out), "internlm2", INTERNLM2)
        make_model.annotate_config(str(out), common.VARIANT_IDS["internlm2"]["template"])
        assert make_model.add_peer_files(str(out), "internlm2")
        return "dummy"
    subprocess.run([sys.executable, os.path.join(REPO, "bench", "gpu", "make_model.py"), "--out", str(out),
                    "--tiny", "--device", "cpu", "--dtype", "f32", "--tokenizer", INTERNLM2],
                   check=True, capture_output=True, timeout=600)
    return "auto"


@needs_shared
def test_fovea_prompt_ids_are_the_same_with_and_without_tokenizer_json(tmp_path):
    """Fovea reads tokenizer.model first; the peers' tokenizer.json (and tokenizer_config.json's add_bos_token)
    must not change the ids it builds."""
    pytest.importorskip("tokenizers")
    fovea = fovea_module()
    Image = pytest.importorskip("PIL.Image")
    with_peers = tmp_path / "with"
    load_format = tiny_model(with_peers)
    assert json.loads((with_peers / "tokenizer.json").read_text(encoding="utf-8"))["model"]["type"] == "BPE"
    without = tmp_path / "without"
    shutil.copytree(with_peers, without)
    os.remove(without / "tokenizer.json")
    make_model.write_tokenizer(str(without), "internlm2", INTERNLM2)  # tokenizer_config.json as before the peers
    assert "add_bos_token" not in json.loads((without / "tokenizer_config.json").read_text())

    def prompt_ids(model):
        with fovea.Engine(str(model), backend="cpu", max_tiles=1, kv_blocks=256, load_format=load_format) as engine:
            return [r.prompt_token_ids for r in engine.generate([
                fovea.Request(prompt="Hello world, 你好\n", max_tokens=1),
                fovea.Request(image=Image.new("RGB", (64, 48), (10, 200, 30)), prompt="What colour?", max_tokens=1)])]
    with_ids, without_ids = prompt_ids(with_peers), prompt_ids(without)
    assert with_ids == without_ids
    assert with_ids[0][0] == 1 and with_ids[1].count(make_model.INTERNLM2_ADDED["<IMG_CONTEXT>"]) == 256
