"""Prompts, images and prompt ids for the trained-weights (SmolLM2) checks: the CPU oracle test's fixed set
(tests/python/test_smollm2_oracle.py) and the fidelity instrument's large set (bench/fidelity/).

Prompt ids are built the way a transformers user builds them: the checkpoint's chat template
(tokenizer.apply_chat_template) over [system?, user], where a task with an image has the user text
"<image>\\n" + question and "<image>" becomes <img> + <IMG_CONTEXT> x 256 + </img> (InternVL's rule, one tile),
then the whole string is tokenized with special tokens split out.
Images are 448 x 448 (one tile, no resize: Pillow and Fovea agree on such pixels exactly), drawn from a seed.
"""
import os

import numpy as np

IMAGE_SIZE = 448
TOKENS_PER_TILE = 256
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)

ORACLE_TASKS = [  # (id, system or None, question, image index or None)
    ("capital", None, "What is the capital of France?", None),
    ("sky", None, "Why is the sky blue? Answer in one sentence.", None),
    ("yes_no", None, "Is the Pacific the largest ocean? Answer yes or no.", None),
    ("math", None, "What is 12 plus 30?", None),
    ("haiku", None, "Write a haiku about autumn leaves.", None),
    ("list", None, "List three primary colors.", None),
    ("translate", None, "Translate 'good morning' into French.", None),
    ("french_q", None, "Quelle est la capitale de l'Italie ?", None),
    ("spanish_q", None, "¿Cuántos días tiene una semana?", None),
    ("digits", None, "Continue the sequence: 2, 4, 6, 8,", None),
    ("system_pirate", "You are a pirate. Always answer like a pirate.", "How are you today?", None),
    ("system_terse", "Answer with one word.", "What color is grass?", None),
    ("image_describe", None, "Describe this image.", 0),
    ("image_color", None, "What is the main color in this picture?", 1),
    ("image_yes_no", None, "Is there a cat in this image? Answer yes or no.", 2),
    ("image_system", "You are a careful art critic.", "What do you see?", 0),
]


def make_image(index):
    """uint8 [448, 448, 3]: a smooth gradient with a few shapes, fixed by `index`."""
    rng = np.random.default_rng(1000 + index)
    y, x = np.mgrid[0:IMAGE_SIZE, 0:IMAGE_SIZE].astype(np.float32) / IMAGE_SIZE
    base = rng.uniform(0, 255, size=3).astype(np.float32)
    tilt = rng.uniform(-120, 120, size=(2, 3)).astype(np.float32)
    img = base + x[..., None] * tilt[0] + y[..., None] * tilt[1]
    for _ in range(4):
        cx, cy, r = rng.uniform(0.2, 0.8), rng.uniform(0.2, 0.8), rng.uniform(0.05, 0.2)
        mask = (x - cx) ** 2 + (y - cy) ** 2 < r * r
        img[mask] = rng.uniform(0, 255, size=3)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def write_image(index, directory):
    from PIL import Image
    path = os.path.join(directory, f"image{index}.png")
    if not os.path.exists(path):
        Image.fromarray(make_image(index)).save(path)
    return path


def pixel_values(index):
    """float32 [1, 3, 448, 448] as GotOcr2's processor gives for a 448 x 448 image (rescale, normalize)."""
    img = make_image(index).astype(np.float32) * np.float32(1 / 255)
    return ((img - MEAN) / STD).transpose(2, 0, 1)[None].astype(np.float32)


def prompt_text(tokenizer, system, question, has_image):
    user = ("<image>\n" if has_image else "") + question
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return text.replace("<image>", "<img>" + "<IMG_CONTEXT>" * TOKENS_PER_TILE + "</img>")


def task_line(task_id, system, question, image_index, image_dir, max_tokens):
    """One `fovea run` task (JSON object) for the same prompt."""
    task = {"id": task_id, "prompt": question, "max_tokens": max_tokens}
    if system:
        task["system"] = system
    if image_index is not None:
        task["image"] = write_image(image_index, image_dir)
    return task
