"""A small synthetic language with learnable structure, for runs that have no real corpus.

Sentences follow a fixed grammar with agreement rules a masked-LM can learn: a subject's number
decides its verb form ("the cat runs" / "the cats run"), each kind of subject has its own verbs and
objects (animals chase animals, people read books), and adjectives come from per-noun lists.
"""

from __future__ import annotations

import random

_SUBJECTS = {
    "animal": ["cat", "dog", "bird", "horse", "fox"],
    "person": ["teacher", "child", "doctor", "farmer", "writer"],
}
_VERBS = {
    "animal": [("chases", "chase"), ("watches", "watch"), ("follows", "follow")],
    "person": [("reads", "read"), ("writes", "write"), ("buys", "buy")],
}
_OBJECTS = {
    "animal": ["mouse", "ball", "rabbit", "shadow"],
    "person": ["book", "letter", "story", "newspaper"],
}
_ADJECTIVES = {
    "animal": ["small", "fast", "brown", "hungry"],
    "person": ["young", "old", "busy", "happy"],
}
_PLACES = ["in the garden", "near the river", "at home", "in the city", "every morning"]


def synthetic_sentence(rng: random.Random) -> str:
    kind = rng.choice(sorted(_SUBJECTS))
    noun = rng.choice(_SUBJECTS[kind])
    singular = rng.random() < 0.5
    subject = noun if singular else noun + "s"
    verb = rng.choice(_VERBS[kind])[0 if singular else 1]
    adjective = rng.choice(_ADJECTIVES[kind])
    words = ["the", adjective, subject, verb, "the", rng.choice(_OBJECTS[kind])]
    if rng.random() < 0.5:
        words.append(rng.choice(_PLACES))
    return " ".join(words) + " ."


def synthetic_sentences(count: int, seed: int = 0) -> list[str]:
    """``count`` sentences of the synthetic language, reproducible from ``seed``."""
    rng = random.Random(seed)
    return [synthetic_sentence(rng) for _ in range(count)]


def synthetic_acceptability(count: int, seed: int = 0) -> list[tuple[str, int]]:
    """A CoLA-like task on the synthetic language: ``(sentence, 1)`` when the verb agrees with the
    subject's number, ``(sentence, 0)`` when its form was swapped ("the cats runs"). Half of each,
    reproducible from ``seed``; deciding needs the subject–verb relation, not a single word."""
    rng = random.Random(seed)
    examples = []
    for index in range(count):
        words = synthetic_sentence(rng).split()
        acceptable = index % 2 == 0
        if not acceptable:
            kind = next(k for k, nouns in _SUBJECTS.items() if words[2].rstrip("s") in nouns)
            singular_form, plural_form = next(pair for pair in _VERBS[kind] if words[3] in pair)
            words[3] = plural_form if words[3] == singular_form else singular_form
        examples.append((" ".join(words), int(acceptable)))
    rng.shuffle(examples)
    return examples


def synthetic_subject_number(count: int, seed: int = 0) -> list[tuple[str, int]]:
    """Is the subject plural? ``(sentence, 1)`` for "the cats …", ``(sentence, 0)`` for "the cat …",
    with the verb's form drawn at random (independent of the subject's number, so it is no clue).
    Unlike :func:`synthetic_acceptability` (an exclusive-or of two number markings, whose loss sits at
    ln 2 for a random number of steps before a model leaves it), the answer is carried by one word,
    the subject, so a small model learns it within a hundred steps: a task every model should learn,
    not one on which the ideas differ."""
    rng = random.Random(seed)
    examples = []
    for _ in range(count):
        words = synthetic_sentence(rng).split()
        kind = next(k for k, nouns in _SUBJECTS.items() if words[2].removesuffix("s") in nouns)
        words[3] = rng.choice(next(pair for pair in _VERBS[kind] if words[3] in pair))
        examples.append((" ".join(words), int(words[2] not in _SUBJECTS[kind])))
    return examples
