"""The fidelity instrument's prompt set: >= 500 varied tasks, fixed by a seed. Questions, yes/no questions,
instructions, arithmetic, completions, in English, French, Spanish, German, Chinese; a share with an image
(448 x 448, one tile) and a share with a system text. Deterministic: the same count gives the same tasks."""
import random

SUBJECTS = ["the sun", "water", "a volcano", "the moon", "honey bees", "the internet", "a bicycle", "rain",
            "the Roman Empire", "photosynthesis", "a black hole", "coffee", "the heart", "electricity", "glaciers",
            "chess", "the piano", "democracy", "vaccines", "the Eiffel Tower", "penguins", "salt", "gravity",
            "the printing press", "a rainbow", "tea", "the Amazon river", "DNA", "wind", "a library"]
COUNTRIES = ["France", "Japan", "Brazil", "Canada", "Egypt", "India", "Italy", "Kenya", "Mexico", "Norway",
             "Spain", "Germany", "China", "Australia", "Peru", "Greece", "Turkey", "Chile", "Poland", "Vietnam"]
YES_NO = ["Is {s} hot?", "Can {s} be seen from space?", "Is {s} older than 100 years?", "Is {s} alive?",
          "Does {s} need water?", "Is {s} made of metal?", "Can you eat {s}?", "Is {s} found in Europe?"]
QUESTIONS = ["What is {s}?", "Why is {s} important?", "How does {s} work?", "Who discovered {s}?",
             "Where can I find {s}?", "What is the capital of {c}?", "What language is spoken in {c}?",
             "What is a famous food from {c}?", "How big is {c}?"]
INSTRUCTIONS = ["Write one sentence about {s}.", "Give me three facts about {s}.", "Explain {s} to a child.",
                "Write a short poem about {s}.", "Summarize the history of {c} in one sentence.",
                "List two pros and two cons of {s}.", "Describe {s} in five words.", "Tell a joke about {s}."]
MULTILINGUAL = ["Quelle est la capitale de {c} ?", "Explique-moi {s} en une phrase.",
                "¿Cuál es la capital de {c}?", "¿Qué es {s}?", "Was ist die Hauptstadt von {c}?",
                "Erkläre {s} in einem Satz.", "{c}的首都是哪里？", "请用一句话介绍{s}。"]
IMAGE_QUESTIONS = ["Describe this image.", "What colors do you see?", "Is there a person in this image? Answer yes or no.",
                   "How many circles are in the picture?", "What is in the center of the image?",
                   "Is this a photo or a drawing?", "Give this picture a title.", "Décris cette image."]
SYSTEMS = ["You are a helpful assistant.", "Answer in one word.", "You are a pirate.", "Be concise.",
           "You are a science teacher for children."]
IMAGES = 8


def make_tasks(count=520, seed=7):
    """[(id, system or None, prompt, image index or None)], `count` of them."""
    rng = random.Random(seed)
    kinds = [(YES_NO, " Answer yes or no."), (QUESTIONS, ""), (INSTRUCTIONS, ""), (MULTILINGUAL, "")]
    tasks = []
    for i in range(count):
        if i % 5 == 4:
            prompt, image = rng.choice(IMAGE_QUESTIONS), rng.randrange(IMAGES)
        elif i % 11 == 7:
            prompt, image = "What is {} plus {}?".format(rng.randint(1, 99), rng.randint(1, 99)), None
        else:
            pool, suffix = kinds[i % len(kinds)]
            prompt = rng.choice(pool).format(s=rng.choice(SUBJECTS), c=rng.choice(COUNTRIES)) + suffix
            image = None
        system = rng.choice(SYSTEMS) if i % 7 == 3 else None
        tasks.append((f"f{i:04d}", system, prompt, image))
    return tasks
