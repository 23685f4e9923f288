"""A seeded synthetic language pair for CPU-sized translation runs (pure Python).

The source side is simple English: ``[subject] [verb] [object] [with/near NP] [adverb]`` with
determiners, adjectives, plurals (some irregular), names, present or past tense and negation.
The target side is an invented SOV language whose words are drawn from the seed, so translating
needs what real translation needs:

* vocabulary mapping: every source word has its own target word (names are copied unchanged);
* word order: ``adverb  subject  PP  object ta  [ne] verb`` (the verb moves to the end, the
  adverb to the front, prepositions become postpositions, adjectives follow their noun);
* agreement: target nouns have one of two genders; determiners agree with the noun's gender and
  number, adjectives with both (suffix), and the verb's suffix with the subject's number in both
  tenses (the English past tense does not show it, so the model must look at the subject);
* case: the object is followed by the particle ``ta``.

Example (seed 0, the tenth training pair)::

    a young woman does not take some tall rivers yesterday
    mobese mi gevu vedomia mir pifeil peduneas ta ne zabagiet
    yesterday a.G1 woman young.G1 some.G1.PL river.G1.PL tall.G1.PL OBJ NOT take.PRESENT.SG

:func:`write_mini_corpus` writes ``{train,valid,test}.{src,tgt}`` (one sentence per line, splits
disjoint) and ``corpus.json`` (the generator's arguments); :func:`ensure_mini_corpus` writes them
only when they are missing or were written with other arguments.

    python -m attnbench.data.mini_corpus data/mini_corpus --seed 0
"""
from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass
from pathlib import Path

SPLITS = ("train", "valid", "test")
SUFFIXES = ("src", "tgt")
MANIFEST = "corpus.json"

# English lexicon: nouns (singular, plural), verbs (base, 3rd person singular, past), adjectives.
NOUNS = [
    ("cat", "cats"), ("dog", "dogs"), ("bird", "birds"), ("horse", "horses"), ("fish", "fish"),
    ("child", "children"), ("man", "men"), ("woman", "women"), ("mouse", "mice"), ("teacher", "teachers"),
    ("farmer", "farmers"), ("king", "kings"), ("queen", "queens"), ("doctor", "doctors"),
    ("student", "students"), ("baker", "bakers"), ("soldier", "soldiers"), ("sailor", "sailors"),
    ("apple", "apples"), ("book", "books"), ("house", "houses"), ("letter", "letters"), ("tree", "trees"),
    ("stone", "stones"), ("song", "songs"), ("door", "doors"), ("window", "windows"), ("boat", "boats"),
    ("cake", "cakes"), ("flower", "flowers"), ("river", "rivers"), ("box", "boxes"), ("key", "keys"),
    ("table", "tables"), ("garden", "gardens"), ("ship", "ships"),
]
VERBS = [
    ("see", "sees", "saw"), ("like", "likes", "liked"), ("find", "finds", "found"),
    ("carry", "carries", "carried"), ("eat", "eats", "ate"), ("build", "builds", "built"),
    ("paint", "paints", "painted"), ("read", "reads", "read"), ("take", "takes", "took"),
    ("watch", "watches", "watched"), ("help", "helps", "helped"), ("follow", "follows", "followed"),
    ("open", "opens", "opened"), ("hold", "holds", "held"), ("bring", "brings", "brought"),
    ("sell", "sells", "sold"), ("buy", "buys", "bought"), ("draw", "draws", "drew"),
    ("wash", "washes", "washed"), ("hide", "hides", "hid"), ("call", "calls", "called"),
    ("visit", "visits", "visited"),
]
ADJECTIVES = ["red", "big", "small", "old", "young", "happy", "green", "tall", "quiet", "strange",
              "clever", "heavy", "blue", "dark", "bright", "poor"]
NAMES = ["Anna", "Omar", "Lena", "Kofi", "Mia", "Ravi", "Yuki", "Pedro"]
PREPOSITIONS = ["with", "near", "behind", "under"]
ADVERBS = ["today", "often", "yesterday", "again", "quickly", "never"]
NUMBERS = ["two", "three", "four"]
DETERMINERS = ("the", "a", "some")  # "a" only with singular nouns, "some" only with plural ones

CONSONANTS = "bdfgklmnprstvz"
VOWELS = "aeiou"
# Target function words, fixed so that the generated stems can avoid them.
TARGET_DETERMINERS = {  # (determiner, gender, plural) -> word
    ("the", 0, False): "ke", ("the", 0, True): "kei", ("the", 1, False): "sa", ("the", 1, True): "sai",
    ("a", 0, False): "mo", ("a", 1, False): "mi", ("some", 0, True): "mor", ("some", 1, True): "mir",
}
PLURAL_SUFFIX = ("ar", "il")  # by gender
ADJECTIVE_SUFFIX = {(0, False): "o", (1, False): "a", (0, True): "os", (1, True): "as"}
VERB_SUFFIX = {("present", False): "et", ("present", True): "un", ("past", False): "ir", ("past", True): "oran"}
OBJECT_PARTICLE, NEGATION = "ta", "ne"
FUNCTION_WORDS = {*TARGET_DETERMINERS.values(), OBJECT_PARTICLE, NEGATION}


@dataclass(frozen=True)
class NounPhrase:
    """An English noun phrase and its translation; ``plural`` drives verb agreement."""

    source: list[str]
    target: list[str]
    plural: bool


class Lexicon:
    """Target words for every English word, drawn from ``rng``: stems of 2-3 CV syllables, unique."""

    def __init__(self, rng: random.Random):
        used = set(FUNCTION_WORDS)

        def stem() -> str:
            while True:
                word = "".join(rng.choice(CONSONANTS) + rng.choice(VOWELS) for _ in range(rng.choice((2, 3))))
                if word not in used:
                    used.add(word)
                    return word

        self.noun = {singular: (stem(), rng.randrange(2)) for singular, _ in NOUNS}  # stem, gender
        self.verb = {base: stem() for base, _, _ in VERBS}
        self.adjective = {a: stem() for a in ADJECTIVES}
        self.word = {w: stem() for w in PREPOSITIONS + ADVERBS + NUMBERS}


class SentenceSampler:
    """Draws (English, target) sentence pairs from one seeded generator."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.lexicon = Lexicon(self.rng)

    def noun_phrase(self) -> NounPhrase:
        rng, lex = self.rng, self.lexicon
        if rng.random() < 0.12:
            name = rng.choice(NAMES)
            return NounPhrase([name], [name], plural=False)
        index = rng.randrange(len(NOUNS))
        singular, plural_form = NOUNS[index]
        stem, gender = lex.noun[singular]
        plural = rng.random() < 0.4
        adjectives = rng.sample(ADJECTIVES, rng.choice((0, 0, 1, 1, 2)))
        if plural and rng.random() < 0.25:
            number = rng.choice(NUMBERS)
            source_det, target_det = [number], [lex.word[number]]
        else:
            determiner = rng.choice(("the", "some") if plural else ("the", "a"))
            source_det, target_det = [determiner], [TARGET_DETERMINERS[determiner, gender, plural]]
        noun = stem + PLURAL_SUFFIX[gender] if plural else stem
        source = source_det + adjectives + [plural_form if plural else singular]
        target = target_det + [noun] + [lex.adjective[a] + ADJECTIVE_SUFFIX[gender, plural] for a in adjectives]
        return NounPhrase(source, target, plural)

    def verb_phrase(self, subject: NounPhrase) -> tuple[list[str], list[str]]:
        """English verb group and the target verb (with negation), agreeing with ``subject``."""
        rng = self.rng
        base, third_person, past = VERBS[rng.randrange(len(VERBS))]
        tense = rng.choice(("present", "past"))
        negated = rng.random() < 0.2
        if negated:
            auxiliary = "did" if tense == "past" else ("do" if subject.plural else "does")
            source = [auxiliary, "not", base]
        elif tense == "past":
            source = [past]
        else:
            source = [base if subject.plural else third_person]
        target = [NEGATION] * negated + [self.lexicon.verb[base] + VERB_SUFFIX[tense, subject.plural]]
        return source, target

    def pair(self) -> tuple[str, str]:
        rng, lex = self.rng, self.lexicon
        subject, obj = self.noun_phrase(), self.noun_phrase()
        verb_source, verb_target = self.verb_phrase(subject)
        source = subject.source + verb_source + obj.source
        target_pp, target_adverb = [], []
        if rng.random() < 0.3:
            preposition, phrase = rng.choice(PREPOSITIONS), self.noun_phrase()
            source += [preposition] + phrase.source
            target_pp = phrase.target + [lex.word[preposition]]
        if rng.random() < 0.3:
            adverb = rng.choice(ADVERBS)
            source.append(adverb)
            target_adverb = [lex.word[adverb]]
        target = target_adverb + subject.target + target_pp + obj.target + [OBJECT_PARTICLE] + verb_target
        return " ".join(source), " ".join(target)


def generate_pairs(num_pairs: int, seed: int) -> list[tuple[str, str]]:
    """``num_pairs`` distinct sentence pairs (distinct source sentences), deterministic in ``seed``."""
    sampler, pairs, seen = SentenceSampler(seed), [], set()
    for _ in range(100 * num_pairs):
        if len(pairs) == num_pairs:
            return pairs
        source, target = sampler.pair()
        if source not in seen:
            seen.add(source)
            pairs.append((source, target))
    raise ValueError(f"could not draw {num_pairs} distinct sentence pairs; ask for fewer")


def corpus_files(root: str | Path) -> dict[str, Path]:
    """``'train.src'`` etc. -> path under ``root``."""
    return {f"{split}.{side}": Path(root) / f"{split}.{side}" for split in SPLITS for side in SUFFIXES}


def write_mini_corpus(root: str | Path, seed: int = 0, train: int = 20000, valid: int = 500,
                      test: int = 1000) -> dict[str, Path]:
    """Write the ``train/valid/test`` splits (disjoint) and ``corpus.json`` under ``root``."""
    sizes = {"train": train, "valid": valid, "test": test}
    for split, size in sizes.items():
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"{split} must be a positive number of sentence pairs, got {size!r}")
    pairs = generate_pairs(train + valid + test, seed)
    files = corpus_files(root)
    Path(root).mkdir(parents=True, exist_ok=True)
    start = 0
    for split, size in sizes.items():
        chunk = pairs[start:start + size]
        start += size
        for side, column in zip(SUFFIXES, zip(*chunk)):
            files[f"{split}.{side}"].write_text("\n".join(column) + "\n", encoding="utf-8")
    (Path(root) / MANIFEST).write_text(json.dumps(dict(seed=seed, **sizes), sort_keys=True) + "\n")
    return files


def ensure_mini_corpus(root: str | Path, seed: int = 0, train: int = 20000, valid: int = 500,
                       test: int = 1000) -> dict[str, Path]:
    """:func:`write_mini_corpus` unless ``root`` already holds the corpus for these arguments."""
    files = corpus_files(root)
    manifest = Path(root) / MANIFEST
    wanted = dict(seed=seed, train=train, valid=valid, test=test)
    if manifest.is_file() and all(f.is_file() for f in files.values()) and json.loads(manifest.read_text()) == wanted:
        return files
    return write_mini_corpus(root, **wanted)


def main() -> None:
    p = argparse.ArgumentParser(description="Write the synthetic mini parallel corpus.")
    p.add_argument("root", help="output folder, e.g. data/mini_corpus")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train", type=int, default=20000)
    p.add_argument("--valid", type=int, default=500)
    p.add_argument("--test", type=int, default=1000)
    args = p.parse_args()
    files = write_mini_corpus(args.root, args.seed, args.train, args.valid, args.test)
    print("\n".join(str(f) for f in files.values()))


if __name__ == "__main__":
    main()
