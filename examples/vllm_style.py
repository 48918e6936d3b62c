#!/usr/bin/env python3
"""A vLLM offline-inference script run on Fovea: only the import differs from vLLM's.

    python3 examples/vllm_style.py MODEL_DIR [IMAGE]

Prompt strings are the user's text (Fovea applies the model's chat template, as vLLM's LLM.chat does); an image
goes in a vLLM-style dict, {"prompt": "<image>\\n...", "multi_modal_data": {"image": PIL image}}.
"""
import sys

from PIL import Image

from fovea import Engine as LLM, SamplingParams  # vLLM: from vllm import LLM, SamplingParams

model = sys.argv[1]
image = Image.open(sys.argv[2]).convert("RGB") if len(sys.argv) > 2 else Image.new("RGB", (448, 448), (200, 40, 40))

llm = LLM(model=model)
sampling_params = SamplingParams(temperature=0.8, top_p=0.95, max_tokens=32, seed=0)
prompts = [
    "Hello, my name is",
    "The capital of France is",
    {"prompt": "<image>\nWhat is the main colour of this image?", "multi_modal_data": {"image": image}},
]
outputs = llm.generate(prompts, sampling_params)
for output in outputs:
    prompt = output.prompt
    generated_text = output.outputs[0].text
    print(f"Prompt: {prompt!r}, Generated text: {generated_text!r}")

# Several samples of one prompt, greedy with a penalty, stop strings and token ids: vLLM's fields.
many = llm.generate("Write a word.", SamplingParams(n=3, temperature=1.0, top_k=50, min_p=0.05, max_tokens=8, seed=1))
for sample in many[0].outputs:
    print(f"sample {sample.index}: {sample.text!r} ({len(sample.token_ids)} tokens, {sample.finish_reason})")
greedy = llm.generate(["Count to ten."], SamplingParams(temperature=0, max_tokens=16, repetition_penalty=1.2,
                                                         stop=["\n"], stop_token_ids=[2]))
print(f"greedy: {greedy[0].outputs[0].text!r}, prompt tokens: {len(greedy[0].prompt_token_ids)}")
