"""Deterministic training corpus for the reference server's n-gram model and tokenizer.

The corpus has three kinds of documents, joined by the EOS string:

1. GSM8K-style question/answer pairs, several per document separated by a blank line,
   formatted exactly as a few-shot prompt continues them: ``Question: {q}\\nAnswer: {a}``.
   Every item of the committed synthetic set (``specsuite/fixtures/data/gsm8k_synth.jsonl``, 330
   problems from seed 0) is included three times, plus 1500 more problems from another
   seed, once each. This is deliberate memorisation: an n-gram model trained on this text
   reproduces the worked solutions of the committed set, so it reaches non-trivial GSM8K
   accuracy on that set (and near zero on real GSM8K, which it has never seen). The
   repeats make the committed continuation win wherever a context is shared with another
   problem. How much is recalled depends on the model's order n: the prompt ends with
   ``?\nAnswer:`` (4 tokens), so the first answer token is chosen from only n - 5 tokens
   of the question. Greedy 5-shot accuracy with specsuite/refserver/ngram.py is about 3% at
   order 6, 60% at order 7, 85% at order 8 and over 90% from order 10.
2. Prose from a small random grammar over a vocabulary of a few thousand word forms
   (nouns, verbs, adjectives, adverbs, names, place names, numbers), with quotes,
   questions and exclamations. It has real entropy, so sampling temperature visibly
   changes the output.
3. Chat traces in the tokenizer's chat format: ``<|user|>``, ``<|assistant|>``, a
   ``<think>`` block closed exactly once per assistant turn, and some tool use with a
   balanced ``<tool_call>`` block followed by a ``<|tool|>`` result and a final answer.

Generation is pure Python driven by ``random.Random(seed)``: the same seed gives the
same text, in well under two seconds.
"""

from __future__ import annotations

import json
import random
from typing import Callable

from specsuite.fixtures.data.gsm8k_synth import COMMITTED_COUNT, COMMITTED_SEED, generate_problems

EOS = "<|endoftext|>"
COMMITTED_REPEATS = 3
EXTRA_PROBLEMS = 1500
CHAT_PROBLEMS = 200
PROSE_CHARS = 500_000
CHAT_CHARS = 350_000

# ---------------------------------------------------------------------------------------
# Vocabulary
# ---------------------------------------------------------------------------------------

_ANIMATE = (
    "farmer baker teacher sailor miller weaver potter carpenter blacksmith shepherd merchant "
    "doctor nurse painter poet musician singer dancer soldier captain pilot driver traveler "
    "stranger neighbor child girl boy woman man grandmother grandfather uncle aunt cousin friend "
    "king queen prince princess knight guard clerk mayor judge student scholar librarian "
    "gardener cook waiter innkeeper hunter ranger scout messenger porter tailor jeweler builder "
    "mason miner engineer inventor scientist astronomer explorer fisherman ferryman "
    "fox owl horse cat dog rabbit hare deer badger bear wolf crow raven sparrow heron goose "
    "duck swan mouse rat frog toad otter beaver squirrel hedgehog goat sheep cow pig donkey "
    "mule lamb calf eagle hawk falcon robin wren lark beetle bee moth butterfly spider snail "
    "lizard turtle whale seal dolphin"
).split()
_OBJECTS = (
    "lantern basket ladder bucket rope barrel kettle teapot cup bowl plate spoon knife fork jar "
    "bottle box chest trunk bag sack coat hat boot glove scarf cloak umbrella map letter book "
    "notebook pencil pen brush canvas candle lamp clock watch mirror window door gate key lock "
    "bell drum flute fiddle violin guitar piano whistle ball kite wagon cart wheel bicycle boat "
    "raft oar sail anchor net hook compass telescope hammer nail saw axe shovel spade rake broom "
    "needle thread button ribbon blanket pillow quilt carpet curtain table chair bench stool "
    "shelf cupboard bed stove oven chimney roof wall fence hedge statue fountain pump pipe stone "
    "pebble rock shell feather leaf branch twig log seed acorn flower rose tulip daisy apple pear "
    "plum cherry lemon orange grape berry melon pumpkin carrot potato onion cabbage turnip bean "
    "loaf cake pie biscuit cookie bun soup stew cheese coin ring necklace bracelet crown sword "
    "shield banner flag ticket parcel package envelope photograph painting poster sign stamp card "
    "puzzle toy doll marble spindle bridle saddle harness kettledrum tapestry locket medal trophy "
    "scroll ledger diary calendar almanac pamphlet newspaper recipe sketch sculpture vase pitcher "
    "tray ladle sieve grater funnel crate pail satchel purse wallet pocketknife spyglass lens "
    "magnet battery radio engine motor lever pulley spring gear cog bolt screw hinge chain "
    "padlock shutter doorbell bellows anvil chisel trowel wheelbarrow scarecrow windmill "
    "weathervane sundial hourglass quill inkwell typewriter postcard suitcase"
).split()
_PLACE_NOUNS = (
    "market harbor village town city forest meadow field orchard garden farm barn mill bakery "
    "library school museum station platform bridge river lake pond stream valley hill mountain "
    "cliff beach shore island cave tunnel road path lane street square park chapel castle palace "
    "tower inn tavern shop workshop kitchen cellar attic hall courtyard cottage cabin lighthouse "
    "dock pier canal marsh desert plain wood glade ridge quarry greenhouse vineyard boathouse "
    "observatory theater warehouse granary stable kennel henhouse bandstand clocktower"
).split()
_ABSTRACT = (
    "silence hope courage patience kindness memory secret promise idea plan dream story song "
    "question answer reason rumor surprise fear joy anger sorrow luck chance danger trouble "
    "mystery journey adventure lesson habit custom rule tradition festival holiday celebration "
    "warning message news weather storm rain snow fog wind thunder sunlight moonlight shadow "
    "darkness noise music laughter advice gossip wisdom comfort mischief curiosity friendship"
).split()
_UNCOUNTABLE = frozenset(
    "silence hope courage patience kindness news weather rain snow fog wind thunder sunlight "
    "moonlight darkness noise music laughter advice gossip wisdom comfort mischief curiosity "
    "friendship anger sorrow luck danger trouble fear joy".split()
)
_IRREGULAR_PLURALS = {
    "child": "children", "man": "men", "woman": "women", "mouse": "mice", "goose": "geese",
    "sheep": "sheep", "deer": "deer", "knife": "knives", "leaf": "leaves", "wolf": "wolves",
    "loaf": "loaves", "shelf": "shelves", "potato": "potatoes", "tomato": "tomatoes",
    "calf": "calves", "scarf": "scarves", "fisherman": "fishermen", "ferryman": "ferrymen",
    "wife": "wives", "thief": "thieves", "hero": "heroes", "echo": "echoes",
}
_ADJECTIVES = (
    "small large tiny huge old young ancient new bright dark pale shiny dusty rusty wooden stone "
    "iron silver golden copper glass woolen silken red blue green yellow purple orange brown grey "
    "black white crimson scarlet amber ivory quiet loud noisy gentle rough smooth soft hard warm "
    "cold cool hot chilly damp wet dry heavy light narrow wide tall short long deep shallow steep "
    "flat round square crooked straight broken cracked torn patched clean dirty muddy sandy rocky "
    "grassy leafy snowy icy foggy misty windy rainy sunny cloudy stormy calm wild tame fierce "
    "brave timid shy proud humble clever foolish wise curious careful careless eager lazy busy "
    "idle tired sleepy hungry thirsty happy sad cheerful gloomy lonely friendly rude polite "
    "strange familiar ordinary rare common precious cheap expensive fancy plain simple elegant "
    "awkward clumsy graceful lively dull sharp blunt sweet sour bitter salty spicy fresh stale "
    "ripe empty full hollow solid hidden lost forgotten famous mysterious magnificent marvelous "
    "splendid dreadful terrible wonderful peculiar odd faint distant nearby northern southern "
    "eastern western early late sudden slow quick swift patient anxious nervous silent glowing "
    "sleeping wandering crumbling fragrant velvet painted carved polished faded tangled frozen "
    "golden-brown sun-baked moss-covered half-finished well-known old-fashioned"
).split()
_ADVERBS = (
    "slowly quickly quietly loudly gently carefully carelessly happily sadly softly suddenly "
    "finally nearly calmly eagerly nervously proudly boldly bravely kindly firmly warmly coldly "
    "politely rudely silently patiently anxiously cheerfully gladly wearily sleepily briskly "
    "steadily lightly heavily sharply neatly swiftly easily again already soon later together "
    "alone outside upstairs downstairs everywhere somewhere clearly plainly oddly strangely "
    "curiously luckily gratefully thoughtfully hastily merrily grimly"
).split()
# base/past for verbs that take an object.
_TRANSITIVE = (
    "carry/carried find/found lift/lifted open/opened close/closed paint/painted build/built "
    "mend/mended fold/folded push/pushed pull/pulled throw/threw catch/caught hold/held "
    "drop/dropped bring/brought take/took buy/bought sell/sold borrow/borrowed lend/lent "
    "steal/stole hide/hid watch/watched follow/followed greet/greeted visit/visited leave/left "
    "fill/filled empty/emptied wash/washed clean/cleaned polish/polished sweep/swept "
    "gather/gathered plant/planted pick/picked cut/cut chop/chopped bake/baked cook/cooked "
    "boil/boiled taste/tasted share/shared count/counted measure/measured weigh/weighed "
    "write/wrote read/read sign/signed draw/drew sketch/sketched study/studied teach/taught "
    "answer/answered call/called describe/described remember/remembered forget/forgot "
    "notice/noticed spot/spotted see/saw hear/heard touch/touched guard/guarded "
    "protect/protected rescue/rescued help/helped check/checked fix/fixed repair/repaired "
    "load/loaded pack/packed unpack/unpacked wrap/wrapped tie/tied hang/hung raise/raised "
    "turn/turned twist/twisted bend/bent break/broke shake/shook stir/stirred mix/mixed "
    "sort/sorted stack/stacked arrange/arranged collect/collected deliver/delivered send/sent "
    "receive/received keep/kept lose/lost win/won offer/offered accept/accepted refuse/refused "
    "trade/traded fetch/fetched chase/chased feed/fed ride/rode steer/steered row/rowed "
    "climb/climbed cross/crossed explore/explored map/mapped mark/marked light/lit warm/warmed "
    "dry/dried cover/covered bury/buried dig/dug ring/rang admire/admired praise/praised "
    "blame/blamed thank/thanked trust/trusted miss/missed love/loved like/liked need/needed "
    "want/wanted choose/chose weave/wove knit/knitted sew/sewed grind/ground press/pressed "
    "test/tested try/tried finish/finished start/started guide/guided carve/carved "
    "decorate/decorated inspect/inspected question/questioned"
).split()
_INTRANSITIVE = (
    "walk/walked run/ran wander/wandered rest/rested sleep/slept wait/waited laugh/laughed "
    "smile/smiled sigh/sighed shout/shouted whisper/whispered sing/sang dance/danced swim/swam "
    "fly/flew float/floated drift/drifted sink/sank rise/rose fall/fell stumble/stumbled "
    "hurry/hurried linger/lingered pause/paused listen/listened nod/nodded shiver/shivered "
    "glow/glowed shine/shone sparkle/sparkled flicker/flickered fade/faded vanish/vanished "
    "appear/appeared arrive/arrived return/returned depart/departed settle/settled kneel/knelt "
    "sit/sat stand/stood lean/leaned grow/grew bloom/bloomed melt/melted freeze/froze "
    "rattle/rattled creak/creaked hum/hummed echo/echoed roar/roared howl/howled bark/barked "
    "sneeze/sneezed yawn/yawned blink/blinked travel/traveled march/marched wobble/wobbled "
    "tremble/trembled work/worked play/played argue/argued agree/agreed hesitate/hesitated "
    "cheer/cheered wave/waved shrug/shrugged frown/frowned"
).split()
_SAY = "said whispered shouted replied called muttered answered added cried insisted admitted explained".split()
_ASK = "asked wondered whispered called".split()
_THINK = "thought knew believed noticed hoped remembered guessed suspected realized decided felt heard".split()
_SPATIAL = "near behind beside under above across along through inside outside around past toward beyond below".split()
_CONNECTIVES = (
    "Meanwhile|Later|Soon|Still|Even so|By then|At last|Afterwards|Suddenly|Of course|"
    "That evening|The next morning|Before long|For a while|In the end|Luckily|Sadly|Oddly enough"
).split("|")
_WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
_MONTHS = "January February March April May June July August September October November December".split()
_SEASONS = "spring summer autumn winter".split()
_NUMBER_WORDS = (
    "two three four five six seven eight nine ten eleven twelve fifteen twenty thirty forty "
    "fifty a hundred"
).split()
_FIRST_NAMES = (
    "Natalia Keiko Amara Beatrice Carmen Delia Elena Fatima Greta Hana Ingrid Jasmine Kira "
    "Leona Maribel Nadia Olivia Priya Rosa Sofia Tamsin Uma Vera Wren Yara Zoe Alice Brenda "
    "Chloe Daphne Esther Fiona Gloria Helen Irene Julia Lucy Maya Nora Ruth Agnes Bettina Cora "
    "Dora Edith Flora Harriet Imogen Joan Mabel Odette Pearl Sylvia Thea Violet Winifred "
    "Marco Andre Bruno Caleb Dmitri Emil Felix Gavin Hugo Isaac Jamal Kenji Liam Mateo Niko "
    "Omar Pablo Quentin Rafael Samir Tobias Ulrich Victor Wesley Xavier Yusuf Zane Arthur Ben "
    "Carlos David Ethan Frank George Henry Ivan James Leo Max Noah Oscar Paul Albert Bernard "
    "Cyril Desmond Edmund Fergus Gideon Horace Jasper Lionel Magnus Neville Percy Rupert "
    "Silas Thaddeus Walter"
).split()
_SURNAMES = (
    "Alder Baxter Carrow Dalton Ellery Finch Garner Holloway Ingram Jessop Kettering Lowell "
    "Marsh Norwood Orton Pemberton Quill Rowntree Sutton Thackeray Underwood Vance Whitlock "
    "Yardley Abbott Bramble Crane Dunmore Everly Fairweather Goodwin Hartley Ives Juniper "
    "Kimble Larkin Merriweather Nettle Oakes Penhallow Radcliffe Sparrow Thornton Upton "
    "Vickery Winslow"
).split()
_PLACE_HEADS = (
    "Ash Bram Cold Dun Elm Fair Glen Hart Iron Kings Lang Mill North Oak Pen Queens Red Stone "
    "Thorn Wester Wolf Ember Frost Gold Hazel Marsh Raven Silver Storm Willow Black Bright "
    "Crow Deep East Fern Grey High Low Moor"
).split()
_PLACE_TAILS = (
    "ford bury ton field wick mouth dale haven stead ham bridge gate moor wood port cliff "
    "holm by thorpe well"
).split()
_PLACES = tuple(head + tail for head in _PLACE_HEADS for tail in _PLACE_TAILS)


def _plural(noun: str) -> str:
    if noun in _IRREGULAR_PLURALS:
        return _IRREGULAR_PLURALS[noun]
    if noun.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


class _Verb:
    """One verb's forms, derived from its base and past."""

    # Irregular pasts hide the doubled final consonant of the -ing form.
    _DOUBLE_ING = frozenset("cut dig run swim sit win forget".split())

    def __init__(self, spec: str) -> None:
        self.base, self.past = spec.split("/")
        base = self.base
        if base.endswith(("s", "x", "z", "ch", "sh", "o")):
            self.third = base + "es"
        elif base.endswith("y") and base[-2] not in "aeiou":
            self.third = base[:-1] + "ies"
        else:
            self.third = base + "s"
        if base in self._DOUBLE_ING or self.past == base + base[-1] + "ed":
            self.ing = base + base[-1] + "ing"
        elif base.endswith("ie"):
            self.ing = base[:-2] + "ying"
        elif base.endswith("e") and not base.endswith(("ee", "ye", "oe")):
            self.ing = base[:-1] + "ing"
        else:
            self.ing = base + "ing"


_TRANSITIVE_VERBS = tuple(_Verb(s) for s in _TRANSITIVE)
_INTRANSITIVE_VERBS = tuple(_Verb(s) for s in _INTRANSITIVE)


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _cap(text: str) -> str:
    return text[0].upper() + text[1:]


# ---------------------------------------------------------------------------------------
# Prose grammar
# ---------------------------------------------------------------------------------------


class _Prose:
    """A tiny random grammar. One instance writes paragraphs about one protagonist."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.new_scene()

    def new_scene(self) -> None:
        rng = self.rng
        self.name = rng.choice(_FIRST_NAMES)
        self.pronoun = rng.choice(("she", "he", "they"))
        self.place = rng.choice(_PLACES)
        self.thing = rng.choice(_OBJECTS)

    # -- phrases -----------------------------------------------------------------------

    def adjectives(self) -> str:
        rng = self.rng
        roll = rng.random()
        if roll < 0.45:
            return ""
        if roll < 0.9:
            return rng.choice(_ADJECTIVES) + " "
        first, second = rng.sample(_ADJECTIVES, 2)
        return f"{first}, {second} " if rng.random() < 0.5 else f"{first} {second} "

    def noun_phrase(self, nouns: tuple[str, ...] | list[str], plural_ok: bool = True) -> tuple[str, bool]:
        """Return (phrase, is_plural)."""
        rng = self.rng
        noun = rng.choice(nouns)
        adj = self.adjectives()
        if plural_ok and noun not in _UNCOUNTABLE and rng.random() < 0.3:
            det = rng.choice(("the", "some", "two", "three", "several", "many", "a few", "her", "his", "their",
                              rng.choice(_NUMBER_WORDS), "the " + rng.choice(_NUMBER_WORDS)))
            return f"{det} {adj}{_plural(noun)}", True
        if noun in _UNCOUNTABLE:
            det = rng.choice(("the", "the", "some", "her", "his", "their"))
        else:
            det = rng.choice(("the", "the", "the", "a", "a", "this", "that", "one", "every", "her", "his",
                              "their", f"{rng.choice(_FIRST_NAMES)}'s"))
        if det == "a":
            det = _article(adj or noun)
        return f"{det} {adj}{noun}", False

    def subject(self) -> tuple[str, bool]:
        rng = self.rng
        roll = rng.random()
        if roll < 0.3:
            return self.name, False
        if roll < 0.5:
            return self.pronoun, self.pronoun == "they"
        if roll < 0.58:
            return f"{rng.choice(('Mr.', 'Mrs.', 'Ms.', 'Dr.', 'Old'))} {rng.choice(_SURNAMES)}", False
        return self.noun_phrase(_ANIMATE)

    def obj(self) -> str:
        rng = self.rng
        roll = rng.random()
        if roll < 0.08:
            return f"the {self.thing}"
        if roll < 0.8:
            return self.noun_phrase(_OBJECTS)[0]
        return self.noun_phrase(_ANIMATE)[0]

    def place_phrase(self) -> str:
        rng = self.rng
        roll = rng.random()
        prep = rng.choice(_SPATIAL)
        if roll < 0.2:
            return f"{prep} {self.place}"
        if roll < 0.3:
            return f"in {rng.choice(_PLACES)}"
        if roll < 0.38:
            feature = rng.choice(("the River {}", "Lake {}", "the Forest of {}", "the Hills of {}", "the Bay of {}"))
            return f"{prep} {feature.format(rng.choice(_PLACES))}"
        return f"{prep} {self.noun_phrase(_PLACE_NOUNS, plural_ok=False)[0]}"

    def time_phrase(self) -> str:
        rng = self.rng
        options = (
            lambda: f"On {rng.choice(_WEEKDAYS)} {rng.choice(('morning', 'afternoon', 'evening', 'night'))}",
            lambda: f"In the {rng.choice(_SEASONS)} of {rng.randint(1702, 2024)}",
            lambda: f"Early in {rng.choice(_MONTHS)}",
            lambda: f"At {rng.randint(1, 12)} o'clock",
            lambda: f"At {rng.randint(1, 12)}:{rng.choice(('05', '15', '20', '30', '45', '50'))}",
            lambda: f"{_cap(rng.choice(_NUMBER_WORDS))} days later",
            lambda: f"After the {rng.choice(_ABSTRACT)}",
            lambda: f"On the {_ordinal(rng.randint(1, 28))} of {rng.choice(_MONTHS)}",
            lambda: rng.choice(_CONNECTIVES),
        )
        return rng.choice(options)()

    # -- clauses -----------------------------------------------------------------------

    def clause(self, depth: int = 0) -> str:
        rng = self.rng
        subj, plural = self.subject()
        be = "were" if plural else "was"
        roll = rng.random()
        if roll < 0.3:
            verb = rng.choice(_TRANSITIVE_VERBS)
            tail = f" {self.place_phrase()}" if rng.random() < 0.5 else ""
            return f"{subj} {verb.past} {self.obj()}{tail}"
        if roll < 0.48:
            verb = rng.choice(_INTRANSITIVE_VERBS)
            adverb = f" {rng.choice(_ADVERBS)}" if rng.random() < 0.5 else ""
            tail = f" {self.place_phrase()}" if rng.random() < 0.5 else ""
            return f"{subj} {verb.past}{adverb}{tail}"
        if roll < 0.58:
            adj = rng.choice(_ADJECTIVES)
            more = f" and {rng.choice(_ADJECTIVES)}" if rng.random() < 0.3 else ""
            return f"{subj} {be} {rng.choice(('', '', 'very ', 'rather ', 'quite ', 'not '))}{adj}{more}"
        if roll < 0.66:
            verb = rng.choice(_TRANSITIVE_VERBS + _INTRANSITIVE_VERBS)
            rest = f" {self.obj()}" if verb in _TRANSITIVE_VERBS else f" {self.place_phrase()}"
            return f"{subj} {be} {verb.ing}{rest}"
        if roll < 0.74:
            verb = rng.choice(_TRANSITIVE_VERBS)
            modal = rng.choice(
                ("could not", "would", "wanted to", "began to", "forgot to", "tried to", "had to", "refused to")
            )
            return f"{subj} {modal} {verb.base} {self.obj()}"
        if roll < 0.8:
            np_, np_plural = self.noun_phrase(_OBJECTS + _ANIMATE)
            return f"there {'were' if np_plural else 'was'} {np_} {self.place_phrase()}"
        if roll < 0.86 and depth < 1:
            return f"{subj} {rng.choice(_THINK)} that {self.clause(depth + 1)}"
        if roll < 0.92:
            np_, np_plural = self.noun_phrase(_ABSTRACT)
            return f"{np_} {'were' if np_plural else 'was'} {rng.choice(_ADJECTIVES)}"
        verb = rng.choice(_TRANSITIVE_VERBS)
        return f"nobody {verb.past} {self.obj()} {rng.choice(('again', 'that day', 'after that', 'for years', 'twice'))}"

    def quote(self) -> str:
        rng = self.rng
        kind = rng.random()
        if kind < 0.25:
            verb = rng.choice(_TRANSITIVE_VERBS)
            return rng.choice(("We must", "I will", "You should", "Let us", "I cannot", "Nobody can")) + \
                f" {verb.base} {self.obj()}" + rng.choice((".", "!", "."))
        if kind < 0.45:
            np_, plural = self.noun_phrase(_OBJECTS + _PLACE_NOUNS + _ABSTRACT)
            return f"{rng.choice(('Is', 'Was'))} {np_} {rng.choice(_ADJECTIVES)}?" if not plural else \
                f"{rng.choice(('Are', 'Were'))} {np_} {rng.choice(_ADJECTIVES)}?"
        if kind < 0.6:
            return f"Look at {self.obj()}!"
        if kind < 0.75:
            verb = rng.choice(_TRANSITIVE_VERBS)
            return f"{rng.choice(('Where', 'Why', 'When', 'How'))} did you {verb.base} {self.obj()}?"
        return _cap(self.clause()) + rng.choice((".", ".", "!"))

    def sentence(self) -> str:
        rng = self.rng
        roll = rng.random()
        if roll < 0.1:
            quote = self.quote()
            speaker = rng.choice((self.name, self.pronoun, self.noun_phrase(_ANIMATE, plural_ok=False)[0]))
            verb = rng.choice(_ASK) if quote.endswith("?") else rng.choice(_SAY)
            if quote.endswith("."):
                quote = quote[:-1] + ","
            if rng.random() < 0.5:
                return f'"{quote}" {speaker} {verb}.'
            inner = quote[:-1] + "." if quote.endswith(",") else quote
            return f'{_cap(speaker)} {verb}, "{inner}"'
        if roll < 0.16:
            adj = rng.choice(_ADJECTIVES)
            return f"{rng.choice(('What', 'Such'))} {_article(adj)} {adj} {rng.choice(_OBJECTS + _PLACE_NOUNS)} it was!"
        if roll < 0.21:
            verb = rng.choice(_TRANSITIVE_VERBS)
            subj, plural = self.subject()
            aux = "Did" if rng.random() < 0.6 else rng.choice(("Could", "Would", "Why did", "Where did"))
            return f"{aux} {subj} {verb.base} {self.obj()}?"
        if roll < 0.35:
            return f"{self.time_phrase()}, {self.clause()}."
        if roll < 0.47:
            return f"{_cap(self.clause())}, {rng.choice(('and', 'but', 'so', 'while'))} {self.clause()}."
        if roll < 0.55:
            opener = rng.choice(("When", "Because", "Although", "Before", "After", "If"))
            return f"{opener} {self.clause()}, {self.clause()}."
        if roll < 0.6:
            return f"{_cap(self.clause())}; {self.clause()}."
        return f"{_cap(self.clause())}."

    def sentences(self) -> list[str]:
        return [self.sentence() for _ in range(self.rng.randint(3, 8))]

    def paragraph(self) -> str:
        return " ".join(self.sentences())

    def gazetteer(self) -> str:
        """An encyclopedia-style paragraph about a place, dense with numbers."""
        rng = self.rng
        place = self.place
        population = rng.randint(300, 250_000)
        pop_text = f"{population:,}" if rng.random() < 0.7 else str(population)
        adj = rng.choice(_ADJECTIVES)
        sentences = [
            f"{place} is {_article(adj)} {adj} {rng.choice(('town', 'village', 'city', 'port'))} "
            f"on the {rng.choice(_PLACES)} {rng.choice(('River', 'Road', 'Canal', 'Coast'))}.",
            f"In {rng.randint(1801, 2023)} it had a population of {pop_text}.",
            f"It is known for its {self.noun_phrase(_PLACE_NOUNS)[0].split(' ', 1)[-1]} and its "
            f"{rng.choice(_OBJECTS)} {rng.choice(('fair', 'market', 'makers', 'museum'))}.",
            f"The {rng.choice(_PLACE_NOUNS)} was built in {rng.randint(1100, 1990)} and rebuilt "
            f"{rng.randint(2, 90)} years later.",
            f"{place} lies {rng.randint(2, 180)} miles {rng.choice(('north', 'south', 'east', 'west'))} "
            f"of {rng.choice(_PLACES)}.",
        ]
        rng.shuffle(sentences)
        return " ".join(sentences[: rng.randint(3, 5)])

    def document(self) -> str:
        rng = self.rng
        self.new_scene()
        parts: list[str] = []
        if rng.random() < 0.35:
            parts.append(f"The {_cap(rng.choice(_ADJECTIVES))} {_cap(rng.choice(_OBJECTS + _ANIMATE))} of {self.place}")
        if rng.random() < 0.2:
            parts.append(self.gazetteer())
        for _ in range(rng.randint(1, 5)):
            parts.append(self.paragraph())
            if rng.random() < 0.3:
                self.new_scene()
        return "\n\n".join(parts)


# ---------------------------------------------------------------------------------------
# Chat traces
# ---------------------------------------------------------------------------------------

_SYSTEM_PROMPTS = (
    "You are a helpful assistant.",
    "You are a concise assistant. Answer briefly.",
    "You are a storyteller who writes short, vivid scenes.",
    "You are a careful assistant. Think before you answer and use tools when they help.",
)


def _turn(role: str, content: str) -> str:
    return f"<|{role}|>\n{content}\n"


def _assistant(thinking: str, answer: str) -> str:
    return _turn("assistant", f"<think>\n{thinking}\n</think>\n{answer}")


def _tool_call(name: str, arguments: dict) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


class _Chat:
    """Chat traces. Every assistant turn opens and closes one <think> block."""

    def __init__(self, rng: random.Random, prose: _Prose, problems: list[dict]) -> None:
        self.rng = rng
        self.prose = prose
        self.problems = problems
        self.next_problem = 0

    def trace(self) -> str:
        rng = self.rng
        makers: tuple[Callable[[], str], ...] = (
            self.arithmetic, self.story, self.place_info, self.names, self.word_problem,
            self.weather_tool, self.calculator_tool, self.population_tool, self.train_tool,
            self.reminder_tool,
        )
        body = rng.choice(makers)()
        if rng.random() < 0.3:
            body = _turn("system", rng.choice(_SYSTEM_PROMPTS)) + body
        return body.rstrip("\n")

    def arithmetic(self) -> str:
        rng = self.rng
        a, b = rng.randint(12, 999), rng.randint(3, 99)
        op = rng.choice(("plus", "minus", "times"))
        if op == "plus":
            result, symbol = a + b, "+"
            steps = f"{a} + {b} = {result}."
        elif op == "minus":
            a, b = max(a, b), min(a, b)
            result, symbol = a - b, "-"
            steps = f"{a} - {b} = {result}."
        else:
            tens, ones = b // 10 * 10, b % 10
            result, symbol = a * b, "*"
            steps = (
                f"{a} * {tens} = {a * tens} and {a} * {ones} = {a * ones}, "
                f"so {a} * {b} = {a * tens} + {a * ones} = {result}."
            )
        question = rng.choice(
            (f"What is {a} {op} {b}?", f"Can you compute {a} {symbol} {b}?", f"How much is {a} {symbol} {b}?")
        )
        answer = rng.choice((f"{a} {symbol} {b} = {result}.", f"The answer is {result}.", f"It is {result}."))
        return _turn("user", question) + _assistant(f"The user wants {a} {symbol} {b}. {steps}", answer)

    def story(self) -> str:
        rng = self.rng
        prose = self.prose
        prose.new_scene()
        animal = rng.choice(_ANIMATE)
        adj = rng.choice(_ADJECTIVES)
        request = rng.choice((
            f"Write a short story about {_article(adj)} {adj} {animal} in {prose.place}.",
            f"Tell me a story set in {prose.place}.",
            f"Can you write a few sentences about {prose.name} and {_article(prose.thing)} {prose.thing}?",
        ))
        thinking = (
            f"The user wants a short story. I will set it in {prose.place}, follow {prose.name}, "
            f"and keep it to {rng.choice(('one paragraph', 'a few sentences', 'two short paragraphs'))}."
        )
        sentences = prose.sentences()
        text = _turn("user", request) + _assistant(thinking, " ".join(sentences))
        if rng.random() < 0.3:
            shorter = sentences[0]
            text += _turn("user", rng.choice(("Make it shorter.", "Can you shorten that to one sentence?")))
            text += _assistant("The user wants a shorter version. I will keep only the first sentence.", shorter)
        return text

    def place_info(self) -> str:
        prose = self.prose
        prose.new_scene()
        question = self.rng.choice(
            (f"Tell me about {prose.place}.", f"What is {prose.place} like?", f"Where is {prose.place}?")
        )
        thinking = f"{prose.place} is a town in the stories I know. I will describe its size, location and history."
        return _turn("user", question) + _assistant(thinking, self.prose.gazetteer())

    def names(self) -> str:
        rng = self.rng
        animal = rng.choice(_ANIMATE)
        adj = rng.choice(_ADJECTIVES)
        count = rng.randint(2, 5)
        picks = rng.sample(_FIRST_NAMES, count)
        question = f"Suggest {_NUMBER_WORDS[count - 2]} names for {_article(adj)} {adj} {animal}."
        thinking = f"The user wants {count} names. A {adj} {animal} could suit names like {', '.join(picks[:2])}."
        listing = "\n".join(f"{i}. {name}" for i, name in enumerate(picks, 1))
        return _turn("user", question) + _assistant(thinking, f"Here are {count} ideas:\n{listing}")

    def word_problem(self) -> str:
        problem = self.problems[self.next_problem % len(self.problems)]
        self.next_problem += 1
        answer_lines = problem["answer"].split("\n")[:-1]
        return _turn("user", problem["question"]) + _assistant(
            "\n".join(answer_lines), f"The answer is {problem['final_answer']}."
        )

    def _tool_trace(self, request: str, plan: str, name: str, arguments: dict, result: dict, final: str) -> str:
        rng = self.rng
        text = _turn("user", request)
        text += _turn("assistant", f"<think>\n{plan}\n</think>\n{_tool_call(name, arguments)}")
        text += _turn("tool", json.dumps(result))
        if rng.random() < 0.5:
            return text + _assistant(f"The {name} tool returned a result. I can answer now.", final)
        return text + _turn("assistant", final)

    def weather_tool(self) -> str:
        rng = self.rng
        city = rng.choice(_PLACES)
        unit = rng.choice(("celsius", "fahrenheit"))
        temp = rng.randint(-5, 32) if unit == "celsius" else rng.randint(20, 95)
        condition = rng.choice(("sunny", "light rain", "heavy rain", "cloudy", "fog", "snow", "windy", "clear"))
        humidity = rng.randint(20, 99)
        return self._tool_trace(
            rng.choice((
                f"What's the weather in {city}?", f"Is it cold in {city} right now?",
                f"Weather for {city} in {unit}, please.",
            )),
            f"The user asks about the weather in {city}. I should call get_weather.",
            "get_weather", {"city": city, "unit": unit},
            {"city": city, "temperature": temp, "unit": unit, "condition": condition, "humidity": humidity},
            f"It is {temp} degrees {unit.capitalize()} in {city} with {condition}, and the humidity is {humidity}%.",
        )

    def calculator_tool(self) -> str:
        rng = self.rng
        a, b = rng.randint(100, 99_999), rng.randint(11, 9_999)
        op = rng.choice(("*", "+", "-"))
        value = {"*": a * b, "+": a + b, "-": a - b}[op]
        expression = f"{a} {op} {b}"
        return self._tool_trace(
            rng.choice((f"Calculate {expression}.", f"What is {expression} exactly?", f"Please work out {expression}.")),
            f"This is a large {({'*': 'product', '+': 'sum', '-': 'difference'})[op]}; "
            "the calculator is safer than doing it by hand.",
            "calculator", {"expression": expression}, {"result": value},
            f"{expression} = {value:,}." if rng.random() < 0.5 else f"The result is {value}.",
        )

    def population_tool(self) -> str:
        rng = self.rng
        town = rng.choice(_PLACES)
        population, year = rng.randint(500, 900_000), rng.randint(1990, 2024)
        return self._tool_trace(
            rng.choice((f"How many people live in {town}?", f"What is the population of {town}?")),
            f"I do not know the population of {town} offhand. I will look it up.",
            "lookup_population", {"town": town}, {"town": town, "population": population, "year": year},
            f"{town} had {population:,} residents in {year}.",
        )

    def train_tool(self) -> str:
        rng = self.rng
        origin, destination = rng.sample(_PLACES, 2)
        departures = sorted(f"{rng.randint(5, 22):02d}:{rng.choice((0, 15, 30, 45)):02d}" for _ in range(3))
        minutes = rng.randint(12, 240)
        return self._tool_trace(
            f"When are the next trains from {origin} to {destination}?",
            f"The user wants train times from {origin} to {destination}. I will call get_train_times.",
            "get_train_times", {"from": origin, "to": destination},
            {"departures": departures, "duration_minutes": minutes},
            f"Trains leave {origin} at {', '.join(departures[:-1])} and {departures[-1]}. "
            f"The trip to {destination} takes {minutes} minutes.",
        )

    def reminder_tool(self) -> str:
        rng = self.rng
        verb = rng.choice(_TRANSITIVE_VERBS)
        task = f"{verb.base} the {rng.choice(_OBJECTS)}"
        when = f"{rng.choice(_WEEKDAYS)} at {rng.randint(1, 12)} {rng.choice(('am', 'pm'))}"
        reminder_id = f"rem_{rng.randint(1000, 9999)}"
        return self._tool_trace(
            f"Remind me to {task} on {when}.",
            "The user wants a reminder. I will create one with the task and the time.",
            "create_reminder", {"text": task, "time": when}, {"status": "ok", "id": reminder_id},
            f"Done. I will remind you to {task} on {when} (reminder {reminder_id}).",
        )


# ---------------------------------------------------------------------------------------
# Assembly
# ---------------------------------------------------------------------------------------


def _format_pair(problem: dict) -> str:
    # Matches the few-shot prompt: "Question: " + q + "\nAnswer:" + " " + answer.
    return f"Question: {problem['question']}\nAnswer: {problem['answer']}"


def _gsm_documents(rng: random.Random, seed: int) -> list[str]:
    committed = generate_problems(COMMITTED_COUNT, COMMITTED_SEED)
    known = {p["question"] for p in committed}
    extra = [p for p in generate_problems(EXTRA_PROBLEMS, 10_000 + seed) if p["question"] not in known]
    problems = committed * COMMITTED_REPEATS + extra
    rng.shuffle(problems)
    groups: list[list[dict]] = []
    start = 0
    while start < len(problems):
        size = rng.randint(3, 8)
        groups.append(problems[start : start + size])
        start += size
    if len(groups) > 1 and len(groups[-1]) < 3:
        groups[-2] += groups.pop()
    return ["\n\n".join(_format_pair(p) for p in group) for group in groups]


def _filled(make: Callable[[], str], budget: int) -> list[str]:
    documents: list[str] = []
    total = 0
    while total < budget:
        documents.append(make())
        total += len(documents[-1])
    return documents


def build_documents(seed: int = 0) -> list[str]:
    """All corpus documents for ``seed``, in a deterministic shuffled order."""
    rng = random.Random(seed)
    prose = _Prose(random.Random(rng.getrandbits(64)))
    chat = _Chat(random.Random(rng.getrandbits(64)), _Prose(random.Random(rng.getrandbits(64))),
                 generate_problems(CHAT_PROBLEMS, 20_000 + seed))
    documents = _gsm_documents(rng, seed) + _filled(prose.document, PROSE_CHARS) + _filled(chat.trace, CHAT_CHARS)
    rng.shuffle(documents)
    return documents


def corpus_text(seed: int = 0, eos: str = EOS) -> str:
    """The whole corpus as one string: documents joined by ``eos``."""
    return eos.join(build_documents(seed))
