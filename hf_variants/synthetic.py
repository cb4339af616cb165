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


# Agreement attractors (Linzen et al. 2016): nouns of either number between the subject and its verb, and
# before it. Past-tense verbs carry no number, so the subject's noun is the only evidence; nouns with
# regular plurals only ("-s"), so a noun's number is its last letter.
_PAST_VERBS = {"animal": ["chased", "watched", "followed"], "person": ["read", "wrote", "bought"]}
_REGULAR_OBJECTS = {"animal": ["ball", "rabbit", "shadow"], "person": ["book", "letter", "song"]}
_PREPOSITIONS = ["near", "with", "behind"]
_REGULAR_NOUNS = {
    "animal": ["cat", "dog", "bird", "horse", "goat"],
    "person": ["teacher", "doctor", "farmer", "writer"],
}


def _noun_phrase(rng: random.Random) -> tuple[list[str], str, bool]:
    """``the [adjective] noun(s)`` of a random kind: its words, kind and number."""
    kind = rng.choice(sorted(_REGULAR_NOUNS))
    plural = rng.random() < 0.5
    words = ["the"] + ([rng.choice(_ADJECTIVES[kind])] if rng.random() < 0.3 else [])
    return [*words, rng.choice(_REGULAR_NOUNS[kind]) + ("s" if plural else "")], kind, plural


def _modifier(rng: random.Random, forms: int = 3) -> list[str]:
    """A phrase holding one attractor: a prepositional phrase (``near the dogs``) or, with ``forms=3``,
    also an object relative clause (``that the dogs watched``) or a subject relative clause (``that
    watched the dogs``); the attractor's number is a fair coin, independent of everything else."""
    noun, kind, _ = _noun_phrase(rng)
    form = rng.randrange(forms)
    if form == 0:
        return [rng.choice(_PREPOSITIONS), *noun]
    verb = rng.choice(_PAST_VERBS[kind])
    return ["that", *noun, verb] if form == 1 else ["that", verb, *noun]


def attractor_sentence(rng: random.Random, attractors: int) -> tuple[str, bool]:
    """One sentence with 0–``attractors`` prepositional phrases before its subject (no comma) and 0–
    ``attractors`` modifiers after it (``near the goats behind the dog the cat that the birds watched
    chased the ball .``); returns the sentence and whether its subject is plural. The subject is the
    first noun not inside a phrase — its position varies, and telling it from a fronted phrase's noun
    takes the word before its article — and every other noun's number is independent of it."""
    words: list[str] = []
    for _ in range(rng.randint(0, attractors)):
        words += _modifier(rng, forms=1)
    subject, kind, plural = _noun_phrase(rng)
    words += subject
    for _ in range(rng.randint(0, attractors)):
        words += _modifier(rng)
    obj = rng.choice(_REGULAR_OBJECTS[kind]) + ("s" if rng.random() < 0.5 else "")
    words += [rng.choice(_PAST_VERBS[kind]), "the", obj]
    if rng.random() < 0.3:
        words.append(rng.choice(_PLACES))
    return " ".join(words) + " .", plural


#: The default difficulty: at most this many attractor phrases on each side of the subject (calibrated: the
#: level at which the BERT control learns the task and its ablated twin does not; docs "The main job").
DEFAULT_ATTRACTORS = 3


def synthetic_attractor_number(
    count: int, seed: int = 0, attractors: int = DEFAULT_ATTRACTORS
) -> list[tuple[str, int]]:
    """Is the subject plural, across attractors? ``(sentence, 1)`` for a plural subject, balanced
    within sampling; see :func:`attractor_sentence`. ``attractors`` is the difficulty: the most
    phrases, each with a noun of random number, before the subject and between it and its (numberless,
    past-tense) verb. Neither a bag of words, the first noun nor the noun nearest the verb decides it."""
    rng = random.Random(seed)
    return [(sentence, int(plural)) for sentence, plural in (attractor_sentence(rng, attractors) for _ in range(count))]


# Associative recall (Zoology's multi-query associative recall, Arora et al. 2023, asked one query per example; MAD's
# in-context recall, Poli et al. 2024): key–value pairs, then a key to look up. Keys and values are words of their
# own (``k0``…, ``v0``…), so that each is one token; the binding lives only in the order of the sequence.
RECALL_KEYS, RECALL_VALUES = 64, 16
#: The default difficulty: key–value pairs per example (calibrated like :data:`DEFAULT_ATTRACTORS`; docs "The
#: main job").
DEFAULT_RECALL_PAIRS = 2


def recall_words() -> list[str]:
    """Every key and value word of the recall task (``k0``…``k63``, ``v0``…``v15``)."""
    return [f"k{key}" for key in range(RECALL_KEYS)] + [f"v{value}" for value in range(RECALL_VALUES)]


def recall_sequence(rng: random.Random, pairs: int) -> tuple[list[str], str, int]:
    """``pairs`` distinct keys, each followed by a value (values may repeat), then ``?`` and one of the keys:
    the words before the query, the query key and its value's number."""
    if not 1 <= pairs <= RECALL_KEYS:
        raise ValueError(f"pairs: needs 1 to {RECALL_KEYS} key–value pairs, got {pairs}")
    keys = rng.sample(range(RECALL_KEYS), pairs)
    values = [rng.randrange(RECALL_VALUES) for _ in keys]
    words = [word for key, value in zip(keys, values, strict=True) for word in (f"k{key}", f"v{value}")]
    asked = rng.randrange(pairs)
    return words, f"k{keys[asked]}", values[asked]


def synthetic_recall(count: int, seed: int = 0, pairs: int = DEFAULT_RECALL_PAIRS) -> list[tuple[str, int]]:
    """Which value did the query key come with? ``("k12 v3 k40 v7 ? k40", 7)``: one of 16 classes (chance 1/16;
    a model that ignores which key was asked, or which value followed which key, can at best guess among the
    values present: :func:`recall_guessing_level`, about ``1/pairs``). ``pairs`` is the difficulty. A bag of
    words cannot solve it, and a single attention layer cannot either (a value must first take in the key before
    it, then the query find it): the task measures in-context recall, on which softmax attention and its linear
    forms differ."""
    rng = random.Random(seed)
    examples = []
    for _ in range(count):
        words, query, value = recall_sequence(rng, pairs)
        examples.append((" ".join([*words, "?", query]), value))
    return examples


def recall_guessing_level(pairs: int = DEFAULT_RECALL_PAIRS) -> float:
    """The recall task's guessing level: the expected accuracy of a model that picks uniformly among the
    distinct values shown in the sequence (it read the values, not which key each came with). With ``D``
    distinct values among ``pairs`` drawn from :data:`RECALL_VALUES`, it is ``E[1/D]``, a little above
    ``1/pairs`` because values repeat (2 pairs: 1/16 · 1 + 15/16 · 1/2 = 0.53125)."""
    if not 1 <= pairs <= RECALL_KEYS:
        raise ValueError(f"pairs: needs 1 to {RECALL_KEYS} key–value pairs, got {pairs}")
    # distinct[d]: the probability that the first k draws show d distinct values, grown one draw at a time
    distinct = [1.0] + [0.0] * pairs
    for _ in range(pairs):
        distinct = [distinct[d] * d / RECALL_VALUES + (distinct[d - 1] * (RECALL_VALUES - d + 1) / RECALL_VALUES
                                                        if d else 0.0) for d in range(pairs + 1)]  # fmt: skip
    return sum(probability / d for d, probability in enumerate(distinct) if d)


def recall_lines(count: int, seed: int, pairs: int = DEFAULT_RECALL_PAIRS) -> list[str]:
    """Recall sequences with their answers (``k12 v3 k40 v7 ? k40 v7``), the MLM corpus's share of the task's
    language when the recall task is run."""
    return [f"{sequence} v{value}" for sequence, value in synthetic_recall(count, seed, pairs)]
