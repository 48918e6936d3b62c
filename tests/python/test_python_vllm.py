"""fovea as vLLM users write it: SamplingParams, generate() on prompt strings and vLLM-style dicts, RequestOutput
fields (outputs[0].text, token_ids, prompt_token_ids), n samples with per-sample seeds, random seeds unless one is
given, token-delta streaming (sync and asyncio), the tokenizer, and a vLLM script that runs with only the import
changed. Sampled first tokens follow the distribution computed here from the engine's own log-probs (chi-square,
fixed seeds: the verdict never changes between runs)."""
import asyncio
import math
import os
import subprocess
import sys
from collections import Counter

import pytest

Image = pytest.importorskip("PIL.Image")
fovea = pytest.importorskip("fovea", reason="the fovea Python module is not built (needs nanobind)")
from fovea import SamplingParams  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def llm(demo_model):
    with fovea.Engine(demo_model, backend="cpu", max_tiles=1, kv_blocks=1024) as engine:
        yield engine


def chi_square_p_value(x, df):
    """P(X >= x) for chi-square with df degrees of freedom: Q(df/2, x/2), series below a+1, continued fraction
    above (the split Numerical Recipes uses)."""
    a, z = df / 2.0, x / 2.0
    if z <= 0:
        return 1.0
    prefactor = math.exp(a * math.log(z) - z - math.lgamma(a))
    if z < a + 1:
        term = total = 1.0 / a
        n = 1
        while term > total * 1e-16:
            term *= z / (a + n)
            total += term
            n += 1
        return 1.0 - total * prefactor
    b, c, d = z + 1 - a, 1e300, 1.0 / (z + 1 - a)
    h = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
        c = b + an / c
        c = c if abs(c) > 1e-300 else 1e-300
        h *= d * c
        if abs(d * c - 1) < 1e-16:
            break
    return prefactor * h


def test_chi_square_p_value():
    assert abs(chi_square_p_value(3.841459, 1) - 0.05) < 1e-6  # scipy.stats.chi2.sf
    assert abs(chi_square_p_value(20.090235, 8) - 0.01) < 1e-6
    assert abs(chi_square_p_value(2.0, 4) - 2 * math.exp(-1)) < 1e-9  # e^-1 (1 + 1)


def expected_distribution(logprobs, temperature, top_k=0, top_p=1.0, min_p=0.0):
    """vLLM's distribution from the first position's raw log-probs {token: logprob} (the most likely ones):
    temperature, min_p relative to the best, top_k, top_p of what is left. Returns {token: p} over the support."""
    best = max(logprobs.values())
    weight = {t: math.exp((lp - best) / temperature) for t, lp in logprobs.items()}
    weight = {t: w for t, w in weight.items() if w >= min_p}
    ranked = sorted(weight, key=lambda t: (-weight[t], t))
    if top_k > 0:
        ranked = ranked[:top_k]
    total = sum(weight[t] for t in ranked)
    kept, mass = [], 0.0
    for t in ranked:
        if mass >= top_p * total:
            break
        kept.append(t)
        mass += weight[t]
    return {t: weight[t] / mass for t in kept}


@pytest.mark.parametrize("case", [dict(temperature=0.05, top_k=5), dict(temperature=0.05, min_p=0.3),
                                  dict(temperature=0.05, top_k=5, top_p=0.6), dict(temperature=0.1, top_k=8)])
def test_sampled_tokens_follow_the_distribution(llm, case):
    draws = 4000
    prompt = "Name a colour."
    first, = llm.generate([prompt], SamplingParams(temperature=0, max_tokens=1, logprobs=20))
    logprobs = {t: lp.logprob for t, lp in first.outputs[0].logprobs[0].items()}
    # The 20 returned must cover every token the case can keep: top_k <= 20, or the 20th is below min_p's cut.
    best, worst = max(logprobs.values()), min(logprobs.values())
    assert 0 < case.get("top_k", 0) <= 20 or math.exp((worst - best) / case["temperature"]) < case["min_p"]
    expected = expected_distribution(logprobs, **case)
    assert len(expected) >= 2
    for t, lp in logprobs.items():  # no token sits on a cut, where float rounding could decide
        ratio = math.exp((lp - best) / case["temperature"])
        assert abs(ratio - case.get("min_p", -1)) > 1e-3

    out, = llm.generate([prompt], SamplingParams(n=draws, max_tokens=1, seed=1000, **case))
    counts = Counter(o.token_ids[0] for o in out.outputs)
    assert set(counts) <= set(expected), f"tokens outside the distribution: {set(counts) - set(expected)}"
    assert all(draws * p >= 20 for p in expected.values())
    chi2 = sum((counts[t] - draws * p) ** 2 / (draws * p) for t, p in expected.items())
    p_value = chi_square_p_value(chi2, len(expected) - 1)
    print(case, f"chi2 {chi2:.2f} over {len(expected)} tokens, p {p_value:.3g}")
    assert p_value > 1e-6, (case, chi2, counts, expected)


def test_seeds_samples_and_outputs(llm):
    sp = SamplingParams(n=3, temperature=1.0, max_tokens=6, seed=7)
    out, = llm.generate(["Say something."], sp)
    assert [o.index for o in out.outputs] == [0, 1, 2] and len({tuple(o.token_ids) for o in out.outputs}) == 3
    for k, sample in enumerate(out.outputs):  # sample k used seed 7 + k
        alone, = llm.generate("Say something.", SamplingParams(temperature=1.0, max_tokens=6, seed=7 + k))
        assert alone.outputs[0].token_ids == sample.token_ids and alone.text == sample.text
    assert out.text == out.outputs[0].text and out.tokens == out.outputs[0].token_ids
    assert out.completion_tokens == sum(len(o.token_ids) for o in out.outputs)
    assert out.finished and out.request_id == "0"
    # No seed: a fresh random one per request (before, seed 0 made these identical).
    a, b = llm.generate(["Say something."] * 2, SamplingParams(temperature=1.0, max_tokens=8))
    assert a.outputs[0].token_ids != b.outputs[0].token_ids
    # The old default still holds for Requests: greedy, deterministic.
    r1, r2 = llm.generate([fovea.Request(prompt="Say something.", max_tokens=4)] * 2)
    assert r1.tokens == r2.tokens


def test_vllm_output_fields_and_prompt_token_ids(llm, tmp_path):
    image = Image.new("RGB", (64, 48), (10, 200, 30))
    out = llm.generate(["Hello", {"prompt": "<image>\nWhat colour?", "multi_modal_data": {"image": image}},
                        {"prompt": "What colour?", "multi_modal_data": {"image": [image, image]}}],
                       SamplingParams(temperature=0, max_tokens=5, logprobs=2))
    hello, one, two = out
    assert hello.prompt == "Hello" and one.prompt == "What colour?"
    tokenizer = llm.tokenizer
    assert hello.prompt_token_ids == tokenizer.apply_chat_template([{"role": "user", "content": "Hello"}])
    assert len(one.prompt_token_ids) == one.prompt_tokens > len(hello.prompt_token_ids)
    assert len(two.prompt_token_ids) > len(one.prompt_token_ids)  # two images, two spans of image tokens
    for result in out:
        sample = result.outputs[0]
        assert result.error is None and sample.finish_reason in ("stop", "length")
        assert len(sample.logprobs) == len(sample.token_ids)
        for token, position in zip(sample.token_ids, sample.logprobs):
            assert token in position and all(lp.logprob <= 0 for lp in position.values())
            assert sorted(lp.rank for lp in position.values() if lp.rank) == [1, 2]
        assert sample.cumulative_logprob == pytest.approx(sum(p[t].logprob for t, p in zip(sample.token_ids,
                                                                                           sample.logprobs)))
    scored, = llm.generate([fovea.Request(prompt="Hello", choices=["yes", "no"])])  # scored, not sampled
    assert scored.prompt_token_ids == hello.prompt_token_ids
    # The same image as a fovea Request answers the same.
    same, = llm.generate([fovea.Request(image=image, prompt="What colour?", max_tokens=5)])
    assert same.tokens == one.tokens
    with pytest.raises(ValueError, match="chat template"):
        llm.generate(["<|im_start|>user\nhi<|im_end|>"])
    with pytest.raises(ValueError, match="placeholders"):
        llm.generate([{"prompt": "look: <image>", "multi_modal_data": {"image": image}}])
    with pytest.raises(ValueError, match="2 SamplingParams for 1"):
        llm.generate(["a"], [SamplingParams(), SamplingParams()])


def test_sampling_fields_reach_the_engine(llm):
    base, = llm.generate(["Count."], SamplingParams(temperature=0, max_tokens=12, ignore_eos=True))
    tokens = base.outputs[0].token_ids
    assert len(tokens) == 12
    stopped, = llm.generate(["Count."], SamplingParams(temperature=0, max_tokens=12, stop_token_ids=[tokens[3]]))
    first_stop = tokens.index(tokens[3])
    assert stopped.outputs[0].token_ids == tokens[:first_stop + 1] and stopped.finish_reason == "stop"
    # Penalties steer greedy choices: every token is the argmax of the raw log-probs (all 796 returned) less the
    # frequency and presence penalties of the tokens before it.
    vocab = llm.tokenizer.vocab_size
    steered, = llm.generate(["Count."], SamplingParams(temperature=0, max_tokens=12, frequency_penalty=-1.0,
                                                       presence_penalty=-0.5, logprobs=vocab, ignore_eos=True))
    counts = Counter()
    for token, position in zip(steered.outputs[0].token_ids, steered.outputs[0].logprobs):
        score = {t: lp.logprob + (1.0 * counts[t] + 0.5 if counts[t] else 0.0) for t, lp in position.items()}
        assert token == max(score, key=lambda t: (score[t], -t))
        counts[token] += 1
    assert steered.outputs[0].token_ids != tokens
    with pytest.raises(ValueError, match="min_p"):
        SamplingParams(min_p=2)
    with pytest.raises(ValueError, match="n must be 1"):
        SamplingParams(choices=["a", "b"], n=2)
    with pytest.raises(ValueError, match="presence_penalty"):
        llm.generate([fovea.Request(prompt="x", presence_penalty=3)])


def test_token_deltas_sync_and_asyncio(llm):
    prompts = ["Tell a story.", "Describe a room."]
    sp = SamplingParams(n=2, temperature=0.9, max_tokens=10, seed=3)
    expected = llm.generate(prompts, sp)

    def check(events):
        text, tokens, results = {}, {}, {}
        for e in events:
            key = (e.index, e.output_index)
            assert not e.restart and key not in results
            if e.finished:
                results[key] = e
                continue
            text[key] = text.get(key, "") + e.text
            tokens.setdefault(key, []).extend(e.token_ids)
        assert len(results) == 4
        for (i, k), final in results.items():
            sample = expected[i].outputs[k]
            assert text[(i, k)] == sample.text and tokens[(i, k)] == sample.token_ids
            assert final.finish_reason == sample.finish_reason
        done = [e.result for e in results.values() if e.result is not None]
        assert sorted(r.index for r in done) == [0, 1]
        assert all(r.outputs == expected[r.index].outputs for r in done)

    events = list(llm.stream(prompts, sp, deltas=True))
    assert sum(not e.finished for e in events) >= 8, "tokens arrive as they are generated, not at the end"
    check(events)

    async def collect():
        return [e async for e in llm.astream(prompts, sp, deltas=True)]

    check(asyncio.run(collect()))
    # Without deltas: whole Results, as before.
    assert sorted(r.index for r in llm.stream(prompts, sp)) == [0, 1]


def test_tokenizer(llm):
    tok = llm.get_tokenizer()
    ids = tok.encode("a cat on a bed")
    assert tok.decode(ids) == "a cat on a bed" and ids
    assert tok.encode("<|im_end|>", allow_special=True) == [tok.token_to_id("<|im_end|>")]
    assert tok.encode("x", add_special_tokens=True)[0] == tok.bos_token_id
    assert tok.eos_token_ids and tok.vocab_size == 796
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}},
                                             {"type": "text", "text": "What is it?"}]}]
    text = tok.apply_chat_template(messages, tokenize=False)
    assert "Be brief." in text and "<image>\nWhat is it?" in text and text.endswith("assistant\n")
    with pytest.raises(ValueError, match="tiling"):
        tok.apply_chat_template(messages)
    out = llm.chat([{"role": "user", "content": "Hi"}], SamplingParams(temperature=0, max_tokens=3))
    assert out[0].prompt_token_ids == tok.apply_chat_template([{"role": "user", "content": "Hi"}])


def test_vllm_script_runs_with_only_the_import_changed(demo_model):
    """examples/vllm_style.py is vLLM's offline example with `from fovea import Engine as LLM, SamplingParams`."""
    script = os.path.join(REPO, "examples", "vllm_style.py")
    source = open(script).read()
    assert "from fovea import Engine as LLM, SamplingParams" in source
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(fovea.__file__))] +
                                                      [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                                       if p]))
    run = subprocess.run([sys.executable, script, str(demo_model)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert sum(line.startswith("Prompt: ") for line in lines) == 3
    assert sum(line.startswith("sample ") for line in lines) == 3 and lines[-1].startswith("greedy: ")
