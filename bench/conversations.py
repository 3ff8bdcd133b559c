"""Seeded multi-session conversations with planted facts and questions, for `bench memory_quality`.

Several people chat in one channel over weeks; between the small talk each conversation plants facts
of every kind a memory must keep (names, numbers, dates said relatively, preferences, places, facts
spread over two turns, facts later changed) and asks about them at the end. Each question names its
evidence turns and the span of each that carries the fact (`key`), so a measurement can tell whether
the fact itself reached a request, not merely a summary that claims to cover the turn.

Small talk reuses the facts' vocabulary (other cities, other foods, other purchases) so that finding
the evidence takes ranking, not a lucky unique word.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

PEOPLE = ["Mahe", "Eris", "Kai", "Noor", "Lucia", "Tomas", "Aiko", "Priya", "Jonah", "Sven", "Mirela", "Dario"]
RELATIVES = [("sister", "she"), ("brother", "he"), ("cousin", "she"), ("nephew", "he"), ("niece", "she"),
             ("grandmother", "she"), ("uncle", "he")]
GIVEN_NAMES = ["Ingrid", "Ravi", "Beatrix", "Oskar", "Yuna", "Matteo", "Freya", "Idris", "Clementine", "Bastian",
               "Marisol", "Teodor", "Ottilie", "Casimir", "Rosalind", "Anselm", "Wilhelmina", "Leocadia"]
CITIES = ["Lisbon", "Kraków", "Osaka", "Valparaíso", "Tbilisi", "Bergen", "Cusco", "Ljubljana", "Hanoi", "Porto",
          "Tallinn", "Marrakesh", "Quebec City", "Kyoto", "Trieste", "Bilbao", "Gdańsk", "Hobart", "Galway", "Tartu"]
EVENTS = [("jazz festival", "went to the"), ("half marathon", "ran the"), ("pottery workshop", "took a"),
          ("climbing competition", "competed in the"), ("book fair", "went to the"),
          ("chess tournament", "played in the"), ("food market", "visited the"), ("choir concert", "sang in the"),
          ("film premiere", "saw the"), ("charity bake sale", "helped at the")]
ITEMS = ["road bike", "espresso machine", "used piano", "telescope", "sewing machine", "kayak", "drone",
         "electric scooter", "standing desk", "film camera", "tent", "synthesizer"]
FOODS = ["cilantro", "olives", "blue cheese", "mushrooms", "anchovies", "eggplant", "licorice", "okra", "raisins",
         "pickled herring", "coconut", "beetroot"]
BANDS = ["Radiohead", "Khruangbin", "Fleetwood Mac", "Bonobo", "Portishead", "Stereolab", "Tinariwen",
         "The National", "Cocteau Twins", "Hiatus Kaiyote", "Yo La Tengo", "Boards of Canada"]
COMPANIES = ["Northwind", "Globex", "Initech", "Umbrella Labs", "Vandelay Imports", "Stark Logistics", "Hooli",
             "Wonka Foods", "Soylent Systems", "Cyberdyne Health", "Monarch Studio", "Acme Robotics"]
ROLES = ["data analyst", "nurse", "sound engineer", "backend developer", "teacher", "product designer",
         "pastry chef", "paralegal"]
PETS = [("dog", "Biscuit"), ("cat", "Miso"), ("dog", "Pepper"), ("rabbit", "Clover"), ("cat", "Saffron"),
        ("dog", "Waffles"), ("parrot", "Kiwi"), ("cat", "Juniper")]
AILMENTS = ["surgery on the left knee", "a tooth pulled", "surgery on the right hip", "a special kidney diet",
            "stitches on the front paw", "antibiotics for an ear infection"]
SUBJECTS = ["organic chemistry", "Portuguese", "statistics", "contract law", "anatomy", "music theory",
            "thermodynamics", "art history"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

# Small talk: what fills most of a real channel. Slots reuse the facts' vocabulary on purpose.
SMALL_TALK = [
    "Hey {p}! How was your {day}?",
    "Not bad, a bit tired from work, but I made {food_ok} soup for dinner and it was lovely.",
    "I keep thinking about visiting {city} someday, the photos look unreal.",
    "Did anyone watch the game last night? The second half was chaos.",
    "haha yes, exactly",
    "That sounds fun!",
    "Oh no, that's rough. Hope it gets better soon.",
    "The weather here has been grey all week, I miss the sun.",
    "I should really get a {item} at some point, but they're so expensive.",
    "My neighbour has a {animal} that barks at every single bicycle going past.",
    "Work was busy today, three meetings back to back and a deadline on {weekday}.",
    "I finished that novel you recommended, the ending surprised me.",
    "We tried a new {food_ok} place downtown, the portions were huge.",
    "Honestly I just want a quiet weekend with tea and a good film.",
    "Has anyone been to {city}? A friend of mine says the old town is beautiful.",
    "lol same",
    "Good morning everyone!",
    "I started going to the gym again, my legs hate me right now.",
    "Did you see the news about the new train line? It might finally open next year.",
    "I'm listening to {band} again, their old albums still hold up.",
    "Thanks, that really helps.",
    "I need to clean my flat this weekend, it's a disaster.",
    "We should all meet up for coffee soon.",
    "My phone screen cracked again, third time this year.",
    "I'm thinking of learning to cook {food_ok} dishes properly.",
    "The {event} in town looked crowded, we walked past it but didn't go in.",
    "Traffic was terrible this morning, I was twenty minutes late.",
    "Oh wow, congratulations!",
    "I can't decide between painting the bedroom green or grey.",
    "Anyone have a good podcast recommendation for long drives?",
]
FOOD_OK = ["pumpkin", "lentil", "ramen", "Thai", "Georgian", "tomato", "Ethiopian", "dumpling", "Peruvian"]


class _Exhausted(Exception):
    """A pool of unique values ran out: that fact is not planted."""


@dataclass
class Turn:
    speaker: str
    text: str
    at: float  # UTC timestamp


@dataclass
class Question:
    text: str
    answer: str
    evidence: list[int]  # turn indices
    keys: list[str]  # per evidence turn, the span that carries the fact
    kind: str


@dataclass
class Conversation:
    seed: int
    speakers: list[str]
    turns: list[Turn] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


def day_text(ts: float) -> str:
    """How answers spell a date: "7 May 2023"."""
    d = datetime.fromtimestamp(ts, UTC)
    return f"{d.day} {d.strftime('%B')} {d.year}"


class _Builder:
    def __init__(self, seed: int, sessions: int, speakers: int):
        self.rng = random.Random(seed)
        rng = self.rng
        self.conv = Conversation(seed, rng.sample(PEOPLE, speakers))
        start = datetime(2023, 1, 1, tzinfo=UTC) + timedelta(days=rng.randint(0, 900))
        self.session_starts = []
        at = start
        for _ in range(sessions):
            at = at + timedelta(days=rng.randint(1, 9), hours=rng.randint(-3, 3))
            at = at.replace(hour=rng.randint(8, 21), minute=rng.randint(0, 59))
            self.session_starts.append(at.timestamp())
        self.pools = {name: rng.sample(pool, len(pool)) for name, pool in (
            ("given", GIVEN_NAMES), ("city", CITIES), ("event", EVENTS), ("item", ITEMS), ("food", FOODS),
            ("band", BANDS), ("company", COMPANIES), ("pet", PETS), ("subject", SUBJECTS), ("role", ROLES),
            ("relative", RELATIVES), ("ailment", AILMENTS))}

    def take(self, pool: str):
        if not self.pools[pool]:
            raise _Exhausted(pool)
        return self.pools[pool].pop()

    def small_talk(self, speaker: str) -> str:
        """One to three small-talk sentences, the way people write in a channel."""
        count = self.rng.choice([1, 1, 2, 2, 3])
        return " ".join(self._sentence(speaker) for _ in range(count))

    def _sentence(self, speaker: str) -> str:
        rng = self.rng
        others = [p for p in self.conv.speakers if p != speaker]
        return rng.choice(SMALL_TALK).format(
            p=rng.choice(others), day=rng.choice(["day", "weekend", "week"]), food_ok=rng.choice(FOOD_OK),
            city=rng.choice(CITIES), item=rng.choice(ITEMS), animal=rng.choice(["dog", "cat", "parrot"]),
            weekday=rng.choice(WEEKDAYS), band=rng.choice(BANDS), event=rng.choice(EVENTS)[0])


def generate(seed: int, sessions: int = 28, turns_per_session: tuple[int, int] = (14, 28),
             speakers: int = 3) -> Conversation:
    """One conversation: sessions of small talk with facts planted among them, then the questions."""
    b = _Builder(seed, sessions, speakers)
    rng, conv = b.rng, b.conv
    plans = _plan_facts(b, sessions)
    for s, start in enumerate(b.session_starts):
        length = rng.randint(*turns_per_session)
        planted = [p for p in plans if p.session == s]
        slots = sorted(rng.sample(range(2, length), min(len(planted), length - 2)))
        at = start
        speaker = rng.choice(conv.speakers)
        for i in range(length):
            at += rng.randint(25, 240)
            if planted and slots and i == slots[0]:
                slots.pop(0)
                fact = planted.pop(0)
                fact.write(conv, at)
                at += 60 * len(fact.turn_texts)
                continue
            speaker = rng.choice([p for p in conv.speakers if p != speaker])
            conv.turns.append(Turn(speaker, b.small_talk(speaker), at))
    for plan in plans:
        if plan.written:
            conv.questions.extend(plan.questions(conv))
    return conv


@dataclass
class _Fact:
    """One planted fact: its turns (speaker, text, key) and how to ask about it once written."""

    session: int
    turn_texts: list[tuple[str, str, str]]
    ask: object  # (conv, turn indices, timestamps) -> list[Question]
    indices: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    written: bool = False

    def write(self, conv: Conversation, at: float) -> None:
        for n, (speaker, text, _key) in enumerate(self.turn_texts):
            self.indices.append(len(conv.turns))
            self.times.append(at + 60 * n)
            conv.turns.append(Turn(speaker, text, at + 60 * n))
        self.written = True

    def questions(self, conv: Conversation) -> list[Question]:
        return self.ask(self)  # type: ignore[operator]


def _q(fact: _Fact, text: str, answer: str, kind: str, which: list[int] | None = None) -> Question:
    which = list(range(len(fact.turn_texts))) if which is None else which
    return Question(text, answer, [fact.indices[i] for i in which], [fact.turn_texts[i][2] for i in which], kind)


KINDS = ["relative", "price", "event", "dislike", "band", "pet", "move", "exam", "job"]
SINGULAR = {"dislike", "band", "move", "job"}  # one per person, or a question about it would have two answers


def _plan_facts(b: _Builder, sessions: int) -> list[_Fact]:
    """Facts spread over the sessions (a changed fact's second half comes later)."""
    rng = b.rng
    facts: list[_Fact] = []
    taken: set[tuple[str, str]] = set()
    for _ in range(3 * sessions):
        who, kind = rng.choice(b.conv.speakers), rng.choice(KINDS)
        if (who, kind) in taken:
            continue
        try:
            _plan_one(b, rng.randrange(sessions), sessions, facts, who, kind)
        except _Exhausted:
            continue
        if kind in SINGULAR:
            taken.add((who, kind))
    return facts


def _plan_one(b: _Builder, s: int, sessions: int, facts: list[_Fact], who: str, kind: str) -> None:
    rng = b.rng
    other = rng.choice([p for p in b.conv.speakers if p != who])

    def at(session: int, turns: list[tuple[str, str, str]], ask) -> None:
        facts.append(_Fact(session, turns, ask))

    if kind == "relative":
        (relation, pronoun), name, age = b.take("relative"), b.take("given"), rng.randint(4, 80)
        key = f"{relation}'s name is {name}, {pronoun} just turned {age}"
        at(s, [(who, f"My {key} and wants a party.", key)],
           lambda f, who=who, relation=relation, name=name, age=age: [
               _q(f, f"What is the name of {who}'s {relation}?", name, "name"),
               _q(f, f"How old did {who}'s {relation} {name} just turn?", str(age), "number")])
    elif kind == "price":
        item, price = b.take("item"), rng.randint(35, 2400)
        key = f"{item} for {price} dollars"
        at(s, [(who, f"I finally bought the {key}, my wallet is crying.", key)],
           lambda f, who=who, item=item, price=price: [
               _q(f, f"How much did {who} pay for the {item}?", str(price), "number")])
    elif kind == "event":
        (event, verb), city = b.take("event"), b.take("city")
        back = rng.choice([1, 1, 2, 3])
        when = {1: "yesterday", 2: "two days ago", 3: "three days ago"}[back]
        key = f"{verb} {event} in {city} {when}"
        at(s, [(who, f"I {key} and it was amazing!", key)],
           lambda f, who=who, event=event, city=city, back=back: [
               _q(f, f"When did {who} go to the {event}?", day_text(f.times[0] - 86_400 * back), "date"),
               _q(f, f"In which city was the {event} that {who} went to?", city, "place")])
    elif kind == "dislike":
        food = b.take("food")
        key = f"can't stand {food}"
        at(s, [(who, f"Honestly I {key}, I always pick it out of everything.", key)],
           lambda f, who=who, food=food: [_q(f, f"Which food does {who} refuse to eat?", food, "preference")])
    elif kind == "band":
        band = b.take("band")
        key = f"favourite band has always been {band}"
        at(s, [(who, f"My {key}, I've seen them live four times.", key)],
           lambda f, who=who, band=band: [_q(f, f"What is {who}'s favourite band?", band, "preference")])
    elif kind == "pet":
        (animal, pet), ailment = b.take("pet"), b.take("ailment")
        first, second = f"vet say about {pet}", f"needs {ailment}"
        at(s, [(other, f"What did the {first}, {who}?", first),
               (who, f"Poor thing {second}, I'm worried sick.", second)],
           lambda f, who=who, pet=pet, animal=animal, ailment=ailment: [
               _q(f, f"What did the vet say {who}'s {animal} {pet} needs?", ailment, "two turns")])
    elif kind == "move":
        city = b.take("city")
        first, second = "Which city are you moving to", f"{city}! We sign the lease"
        at(s, [(other, f"{first}, {who}?", first), (who, f"{second} on {rng.choice(WEEKDAYS)}.", second)],
           lambda f, who=who, city=city: [_q(f, f"Which city is {who} moving to?", city, "two turns")])
    elif kind == "exam":
        subject = b.take("subject")
        when = b.session_starts[s] + 86_400 * rng.randint(5, 30)
        key = f"{subject} exam is on {day_text(when)}"
        at(s, [(who, f"My {key}, wish me luck.", key)],
           lambda f, who=who, subject=subject, when=when: [
               _q(f, f"When is {who}'s {subject} exam?", day_text(when), "date")])
    elif kind == "job" and s < sessions - 2:
        first_job, second_job, role = b.take("company"), b.take("company"), b.take("role")
        later = rng.randrange(s + 1, sessions)
        key1, key2 = f"job at {first_job} as a {role}", f"left {first_job} and joined {second_job}"
        early = _Fact(s, [(who, f"I started a new {key1}, first day was intense.", key1)], lambda f: [])
        late = _Fact(later, [(who, f"Big news: I {key2}.", key2)],
                     lambda f, who=who, second_job=second_job, early=early, first_job=first_job: [
                         _q(f, f"Where does {who} work now?", second_job, "changed"),
                         Question(f"Where did {who} work before {second_job}?", first_job,
                                  [early.indices[0], f.indices[0]], [early.turn_texts[0][2], key2], "changed")]
                     if early.written else [])
        facts.extend([early, late])
