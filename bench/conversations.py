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

PEOPLE = ["Mahe", "Eris", "Kai", "Noor", "Lucia", "Tomas", "Aiko", "Priya", "Jonah", "Sven", "Mirela", "Dario",
          "Amara", "Felix", "Hana", "Rohan", "Zofia", "Emeka", "Ines", "Levi"]
RELATIVES = [("sister", "she"), ("brother", "he"), ("cousin", "she"), ("nephew", "he"), ("niece", "she"),
             ("grandmother", "she"), ("uncle", "he"), ("aunt", "she"), ("grandfather", "he"), ("stepbrother", "he")]
GIVEN_NAMES = ["Ingrid", "Ravi", "Beatrix", "Oskar", "Yuna", "Matteo", "Freya", "Idris", "Clementine", "Bastian",
               "Marisol", "Teodor", "Ottilie", "Casimir", "Rosalind", "Anselm", "Wilhelmina", "Leocadia", "Dagny",
               "Ezequiel", "Perpetua", "Thaddeus", "Seraphine", "Lazlo", "Ottoline", "Cosimo", "Henrietta", "Ambrose",
               "Philippa", "Evander", "Marguerite", "Florian", "Isolde", "Barnaby", "Annika", "Quentin", "Solveig",
               "Ignatius", "Liesel", "Augustin", "Delphine", "Radomir", "Juniper", "Kasimir", "Ondine", "Fabian",
               "Griselda", "Horatio", "Imogen", "Jasper", "Katarina", "Lysander", "Mireille", "Nikolai", "Odette"]
CITIES = ["Lisbon", "Kraków", "Osaka", "Valparaíso", "Tbilisi", "Bergen", "Cusco", "Ljubljana", "Hanoi", "Porto",
          "Tallinn", "Marrakesh", "Quebec City", "Kyoto", "Trieste", "Bilbao", "Gdańsk", "Hobart", "Galway", "Tartu",
          "Cork", "Salzburg", "Montevideo", "Oaxaca", "Reykjavik", "Seville", "Plovdiv", "Dunedin", "Tromsø",
          "Cartagena", "Matera", "Lyon", "Antwerp", "Brno", "Chiang Mai", "Halifax", "Mendoza", "Nantes", "Riga",
          "Sapporo", "Tangier", "Utrecht", "Valletta", "Wrocław", "Zadar", "Aarhus", "Bruges", "Cádiz", "Durban"]
EVENTS = [("jazz festival", "went to the"), ("half marathon", "ran the"), ("pottery workshop", "took a"),
          ("climbing competition", "competed in the"), ("book fair", "went to the"),
          ("chess tournament", "played in the"), ("food market", "visited the"), ("choir concert", "sang in the"),
          ("film premiere", "saw the"), ("charity bake sale", "helped at the"), ("salsa class", "tried a"),
          ("wine tasting", "went to a"), ("hackathon", "joined a"), ("poetry slam", "performed at a"),
          ("triathlon", "finished a"), ("comic convention", "went to the"), ("glassblowing course", "took a"),
          ("sailing regatta", "crewed in the"), ("quiz night", "won the"), ("orchid show", "visited the"),
          ("beach clean-up", "helped with the"), ("silent disco", "danced at a"), ("cooking contest", "entered a")]
ITEMS = ["road bike", "espresso machine", "used piano", "telescope", "sewing machine", "kayak", "drone",
         "electric scooter", "standing desk", "film camera", "tent", "synthesizer", "cello", "typewriter",
         "record player", "canoe", "pizza oven", "3D printer", "rowing machine", "microscope", "accordion",
         "pressure cooker", "e-reader", "snowboard", "paddleboard", "metal detector", "loom", "projector"]
# How a question names an item or an event: in other words than the turn that holds the fact, as people ask.
ITEM_ASKED = {"road bike": "new bicycle", "espresso machine": "coffee maker", "used piano": "second-hand keyboard "
              "instrument", "telescope": "stargazing gear", "sewing machine": "machine for stitching clothes",
              "kayak": "little paddle boat", "drone": "flying camera", "electric scooter": "e-scooter",
              "standing desk": "height-adjustable workstation", "film camera": "analogue camera", "tent": "camping "
              "shelter", "synthesizer": "keyboard for electronic music", "cello": "string instrument",
              "typewriter": "old writing machine", "record player": "turntable", "canoe": "open boat",
              "pizza oven": "outdoor oven", "3D printer": "printer that makes objects", "rowing machine": "home "
              "workout machine", "microscope": "lab magnifier", "accordion": "squeezebox", "pressure cooker": "fast "
              "cooking pot", "e-reader": "digital book device", "snowboard": "board for the slopes",
              "paddleboard": "SUP board", "metal detector": "treasure-hunting gadget", "loom": "weaving frame",
              "projector": "home cinema beamer"}
EVENT_ASKED = {"jazz festival": "music weekend", "half marathon": "21 km race", "pottery workshop": "clay class",
               "climbing competition": "bouldering contest", "book fair": "literature expo",
               "chess tournament": "board game championship", "food market": "street food event",
               "choir concert": "singing performance", "film premiere": "movie opening night",
               "charity bake sale": "fundraiser with cakes", "salsa class": "dance lesson",
               "wine tasting": "vineyard tour", "hackathon": "coding weekend", "poetry slam": "spoken word night",
               "triathlon": "swim-bike-run race", "comic convention": "comics expo",
               "glassblowing course": "glass art lesson", "sailing regatta": "boat race",
               "quiz night": "trivia evening", "orchid show": "flower exhibition",
               "beach clean-up": "litter-picking day by the sea", "silent disco": "headphone party",
               "cooking contest": "cooking competition"}
COLOURS = ["red", "yellow", "teal", "orange", "purple", "green", "navy", "white", "pink", "silver", "mustard",
           "turquoise", "maroon", "lilac"]
SCENES = ["on the beach at sunset", "in the garden", "by the lake", "on the balcony", "in the living room",
          "outside the old station", "on a mountain trail", "at the harbour", "in the snow", "under a big oak tree"]
FOODS = ["cilantro", "olives", "blue cheese", "mushrooms", "anchovies", "eggplant", "licorice", "okra", "raisins",
         "pickled herring", "coconut", "beetroot", "capers", "tofu", "sardines", "celery", "marzipan", "liver",
         "grapefruit", "natto", "fennel", "kimchi"]
BANDS = ["Radiohead", "Khruangbin", "Fleetwood Mac", "Bonobo", "Portishead", "Stereolab", "Tinariwen",
         "The National", "Cocteau Twins", "Hiatus Kaiyote", "Yo La Tengo", "Boards of Canada", "Massive Attack",
         "Beach House", "Talking Heads", "Sigur Rós", "Fela Kuti", "Big Thief", "Air", "Slowdive", "Björk",
         "Buena Vista Social Club", "Mazzy Star", "The Cure"]
COMPANIES = ["Northwind", "Globex", "Initech", "Umbrella Labs", "Vandelay Imports", "Stark Logistics", "Hooli",
             "Wonka Foods", "Soylent Systems", "Cyberdyne Health", "Monarch Studio", "Acme Robotics", "Pied Piper",
             "Gringotts Finance", "Oscorp Energy", "Tyrell Bio", "Wayne Freight", "Aperture Optics", "Massive Dynamic",
             "Blue Sun Media", "Virtucon", "Dunder Paper", "Sterling Cooper", "Prestige Worldwide"]
ROLES = ["data analyst", "nurse", "sound engineer", "backend developer", "teacher", "product designer",
         "pastry chef", "paralegal", "physiotherapist", "translator", "architect", "firefighter", "librarian",
         "electrician", "vet technician", "copywriter", "pharmacist", "park ranger", "court reporter", "florist"]
PETS = [("dog", "Biscuit"), ("cat", "Miso"), ("dog", "Pepper"), ("rabbit", "Clover"), ("cat", "Saffron"),
        ("dog", "Waffles"), ("parrot", "Kiwi"), ("cat", "Juniper"), ("dog", "Noodle"), ("hamster", "Pistachio"),
        ("tortoise", "Gandalf"), ("cat", "Tofu"), ("dog", "Marmalade"), ("ferret", "Bandit")]
AILMENTS = ["surgery on the left knee", "a tooth pulled", "surgery on the right hip", "a special kidney diet",
            "stitches on the front paw", "antibiotics for an ear infection", "eye drops twice a day",
            "a cast on the back leg", "a low-fat diet", "allergy shots every month"]
SUBJECTS = ["organic chemistry", "Portuguese", "statistics", "contract law", "anatomy", "music theory",
            "thermodynamics", "art history", "macroeconomics", "Mandarin", "pharmacology", "linear algebra",
            "medieval literature", "microbiology", "tax law", "Icelandic"]
HOBBIES = ["the cello", "bouldering", "woodcarving", "Italian", "calligraphy", "beekeeping", "fencing",
           "watercolour painting", "the ukulele", "archery", "sourdough baking", "origami", "birdwatching",
           "knitting", "tango", "astrophotography", "the banjo", "sign language"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

# Small talk: what fills most of a real channel. Slots reuse the facts' vocabulary on purpose, so finding the
# evidence takes ranking, and people mention the same kinds of things (trips, purchases, pets) without them
# being the fact asked about.
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
    "I can't decide between painting the bedroom {colour} or grey.",
    "Anyone have a good podcast recommendation for long drives?",
    "That's so cool! How did you get into {hobby}? I've always wondered what it's like.",
    "My cousin tried {hobby} for a while but gave up after a month, it's harder than it looks.",
    "Someone at work is selling a {colour} {item}, I'm tempted but I have no space for it.",
    "I saw a {colour} {animal} in the park today, it looked so proud of itself.",
    "We might do a weekend in {city} in the spring, nothing booked yet though.",
    "The {event} last year was better organised, this one felt rushed.",
    "I'm so proud of you, {p}. You've worked really hard for this.",
    "What are you all doing for the holidays? I haven't planned a thing.",
    "Ugh, my landlord still hasn't fixed the heating.",
    "I found an old photo album at my parents' place, we all had terrible haircuts.",
    "Do you think {band} will ever tour again? I'd pay anything to see them.",
    "I made a huge pot of {food_ok} stew, there's enough for a week.",
    "My friend works as a {role} and says the hours are brutal.",
    "Reading a book about the history of {city}, it's surprisingly gripping.",
    "Remember when we all got lost on the way to that {event}? Good times.",
]
# A speaker's own life comes up again and again (their pet, their relative, their pastime, their work), so a
# question about one moment of it has many turns to choose from, as in a real channel.
LIFE_TALK = [
    "{pet} stole a sock again this morning, I swear that {animal} has a collection somewhere.",
    "Took {pet} for a long walk by the river, we were both exhausted after.",
    "{pet} is sleeping on my keyboard right now, so this message is a miracle.",
    "Had a long call with my {relation} {relative} yesterday, we talked about everything and nothing.",
    "My {relation} {relative} sent me a postcard, {pronoun} still writes the best letters.",
    "Practised {hobby} for two hours tonight, my hands are so sore.",
    "I think I'm finally getting better at {hobby}, my teacher said so anyway.",
    "Long day at work again, the new project is eating all my evenings.",
    "My manager wants everyone back in the office three days a week now, ugh.",
    "{pet} and I are watching the rain together, peak cosiness.",
    "Found a video about {hobby} that explained what I've been doing wrong for months.",
    "My {relation} {relative} wants to come visit next month, I need to tidy the spare room.",
]
FOOD_OK = ["pumpkin", "lentil", "ramen", "Thai", "Georgian", "tomato", "Ethiopian", "dumpling", "Peruvian",
           "Sicilian", "Korean", "bean", "miso", "Lebanese", "Oaxacan"]
# What people say around a piece of news in a real chat: the fact sits inside chatter, not on a line of its own.
LEAD_INS = ["", "", "", "Oh man, what a week. ", "So, news from my side: ", "Quick update! ", "Guess what? ",
            "Okay so this is random but ", "Sorry I've been quiet. "]
TAIL_OFFS = ["", "", "", " Anyway, how's everyone doing?", " Still can't quite believe it.", " More on that later!",
             " What have you all been up to?", " Life's been a lot lately."]

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
        for _ in range(sessions):  # over months: a few days to two weeks apart
            at = at + timedelta(days=rng.randint(2, 14), hours=rng.randint(-3, 3))
            at = at.replace(hour=rng.randint(8, 21), minute=rng.randint(0, 59))
            self.session_starts.append(at.timestamp())
        self.pools = {name: rng.sample(pool, len(pool)) for name, pool in (
            ("given", GIVEN_NAMES), ("city", CITIES), ("event", EVENTS), ("item", ITEMS), ("food", FOODS),
            ("band", BANDS), ("company", COMPANIES), ("pet", PETS), ("subject", SUBJECTS), ("role", ROLES),
            ("relative", RELATIVES), ("ailment", AILMENTS), ("hobby", HOBBIES))}
        # each speaker's pet, relative and pastime: talked about all along, and what their facts are about
        self.lives = {who: {"pet": self.take("pet"), "relative": (*self.take("relative"), self.take("given")),
                            "hobby": self.take("hobby")} for who in self.conv.speakers}

    def take(self, pool: str):
        if not self.pools[pool]:
            raise _Exhausted(pool)
        return self.pools[pool].pop()

    def small_talk(self, speaker: str) -> str:
        """One to three small-talk sentences, the way people write in a channel; a third of them about the
        speaker's own life."""
        count = self.rng.choice([1, 1, 2, 2, 3])
        return " ".join(self._life(speaker) if self.rng.random() < 0.3 else self._sentence(speaker)
                        for _ in range(count))

    def _life(self, speaker: str) -> str:
        life = self.lives[speaker]
        (animal, pet), (relation, pronoun, relative) = life["pet"], life["relative"]
        return self.rng.choice(LIFE_TALK).format(pet=pet, animal=animal, relation=relation, pronoun=pronoun,
                                                 relative=relative, hobby=life["hobby"])

    def news(self, text: str) -> str:
        """A fact as someone says it: inside a little chatter."""
        return f"{self.rng.choice(LEAD_INS)}{text}{self.rng.choice(TAIL_OFFS)}"

    def _sentence(self, speaker: str) -> str:
        rng = self.rng
        others = [p for p in self.conv.speakers if p != speaker]
        return rng.choice(SMALL_TALK).format(
            p=rng.choice(others), day=rng.choice(["day", "weekend", "week"]), food_ok=rng.choice(FOOD_OK),
            city=rng.choice(CITIES), item=rng.choice(ITEMS), animal=rng.choice(["dog", "cat", "parrot", "rabbit"]),
            weekday=rng.choice(WEEKDAYS), band=rng.choice(BANDS), event=rng.choice(EVENTS)[0],
            colour=rng.choice(COLOURS), hobby=rng.choice(HOBBIES), role=rng.choice(ROLES))


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
        if plan.written and plan.asked:
            conv.questions.extend(plan.questions(conv))
    return conv


@dataclass
class _Fact:
    """One planted fact: its turns (speaker, text, key) and how to ask about it once written; a fact not
    `asked` about is there as a distractor, the way a real channel holds far more news than anyone asks about."""

    session: int
    turn_texts: list[tuple[str, str, str]]
    ask: object  # (fact) -> list[Question]
    asked: bool = True
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


def _across(first: _Fact, first_turn: int, second: _Fact, second_turn: int, text: str, answer: str,
            kind: str) -> list[Question]:
    """A question whose evidence is a turn of each of two facts (said in different sessions)."""
    if not (first.written and second.written):
        return []
    return [Question(text, answer, [first.indices[first_turn], second.indices[second_turn]],
                     [first.turn_texts[first_turn][2], second.turn_texts[second_turn][2]], kind)]


# The kinds of fact planted, and the category each question reports under:
# single-hop (one turn says it), multi-hop (two turns, maybe sessions apart), temporal (a date, often said
# relatively), update (a fact changed later: the newer value must win), third-party (about someone who is
# not in the channel), photo (in the description of a shared photo).
KINDS = ["relative", "price", "event", "dislike", "band", "pet", "move", "exam", "job", "photo", "friend",
         "hobby", "family_move"]
CATEGORIES = ("single-hop", "multi-hop", "temporal", "update", "third-party", "photo")
# One per person, or a question about it would have two answers.
SINGULAR = {"dislike", "band", "move", "job", "hobby", "pet", "relative", "family_move"}
ASKED = 0.6  # the share of planted facts asked about; the rest are distractors of the same shape


def _plan_facts(b: _Builder, sessions: int) -> list[_Fact]:
    """Facts spread over the sessions (a changed fact's second half comes later)."""
    rng = b.rng
    facts: list[_Fact] = []
    taken: set[tuple[str, str]] = set()
    for _ in range(4 * sessions):
        who, kind = rng.choice(b.conv.speakers), rng.choice(KINDS)
        if (who, kind) in taken:
            continue
        planned = len(facts)
        try:
            _plan_one(b, rng.randrange(sessions), sessions, facts, who, kind)
        except _Exhausted:
            continue
        asked = rng.random() < ASKED
        for fact in facts[planned:]:
            fact.asked = asked
        if kind in SINGULAR:
            taken.add((who, kind))
    return facts


def _plan_one(b: _Builder, s: int, sessions: int, facts: list[_Fact], who: str, kind: str) -> None:
    rng = b.rng
    other = rng.choice([p for p in b.conv.speakers if p != who])
    later = rng.randrange(s + 1, sessions) if s < sessions - 1 else None

    def at(session: int, turns: list[tuple[str, str, str]], ask) -> _Fact:
        fact = _Fact(session, turns, ask)
        facts.append(fact)
        return fact

    life = b.lives[who]
    if kind == "relative":  # about the relative the speaker talks of all along
        (relation, pronoun, name), age = life["relative"], rng.randint(4, 80)
        key = f"{name} just turned {age}"
        at(s, [(who, b.news(f"My {relation} {key} and wants a party."), key)],
           lambda f, who=who, relation=relation, age=age: [
               _q(f, f"How old is {who}'s {relation} now?", str(age), "single-hop")])
    elif kind == "family_move" and later is not None:
        (relation, pronoun, name), city = life["relative"], b.take("city")
        key1, key2 = f"{relation} {name}", f"{name} just moved to {city}"
        first = at(s, [(who, b.news(f"Visiting my {key1} this weekend, {pronoun} makes the best pancakes."), key1)],
                   lambda f: [])
        at(later, [(who, b.news(f"{key2}, I'm going to miss {'her' if pronoun == 'she' else 'him'}."), key2)],
           lambda f, first=first, who=who, relation=relation, city=city: _across(
               first, 0, f, 0, f"Which city did {who}'s {relation} move to?", city, "multi-hop"))
    elif kind == "price":
        item, price = b.take("item"), rng.randint(35, 2400)
        key = f"{item} for {price} dollars"
        at(s, [(who, b.news(f"I finally bought the {key}, my wallet is crying."), key)],
           lambda f, who=who, item=item, price=price: [
               _q(f, f"How much did {who} pay for the {ITEM_ASKED[item]}?", str(price), "single-hop")])
    elif kind == "event":
        (event, verb), city = b.take("event"), b.take("city")
        back = rng.choice([1, 1, 2, 3, 7])
        when = {1: "yesterday", 2: "two days ago", 3: "three days ago", 7: "last week"}[back]
        key = f"{verb} {event} in {city} {when}"
        at(s, [(who, b.news(f"I {key} and it was amazing!"), key)],
           lambda f, who=who, event=event, city=city, back=back: [
               *([_q(f, f"When did {who} go to the {EVENT_ASKED[event]}?", day_text(f.times[0] - 86_400 * back),
                     "temporal")] if back < 7 else []),  # "last week" names no day
               _q(f, f"In which city was the {EVENT_ASKED[event]} that {who} went to?", city, "single-hop")])
    elif kind == "dislike":
        food = b.take("food")
        key = f"can't stand {food}"
        at(s, [(who, b.news(f"Honestly I {key}, I always pick it out of everything."), key)],
           lambda f, who=who, food=food: [_q(f, f"Which food does {who} refuse to eat?", food, "single-hop")])
    elif kind == "band":
        band = b.take("band")
        key = f"favourite band has always been {band}"
        first = at(s, [(who, b.news(f"My {key}, I've seen them live four times."), key)],
                   lambda f, who=who, band=band: [_q(f, f"Which group does {who} love most?", band, "single-hop")])
        if later is not None and rng.random() < 0.5:  # tastes change: the question is then about the new one
            newer = b.take("band")
            key2 = f"gone off {band}, these days it's all {newer}"
            first.ask = lambda f: []
            at(later, [(who, b.news(f"Weirdly I've {key2}."), key2)],
               lambda f, who=who, newer=newer: [_q(f, f"Which group is {who} into these days?", newer, "update")])
    elif kind == "pet":
        (animal, pet), ailment = life["pet"], b.take("ailment")
        first, second = f"vet say about {pet}", f"needs {ailment}"
        at(s, [(other, f"What did the {first}, {who}?", first),
               (who, f"Poor thing {second}, I'm worried sick.", second)],
           lambda f, who=who, pet=pet, animal=animal, ailment=ailment: [
               _q(f, f"What treatment does {who}'s {animal} need, according to the vet?", ailment, "multi-hop")])
    elif kind == "move":
        city = b.take("city")
        first, second = "Which city are you moving to", f"{city}! We sign the lease"
        moving = at(s, [(other, f"{first}, {who}?", first), (who, f"{second} on {rng.choice(WEEKDAYS)}.", second)],
                    lambda f, who=who, city=city: [_q(f, f"Where is {who} relocating?", city, "multi-hop")])
        if later is not None and rng.random() < 0.4:  # plans change: the newer city wins
            newer = b.take("city")
            key = f"not moving to {city} after all, it's going to be {newer}"
            moving.ask = lambda f: []
            at(later, [(who, b.news(f"Change of plans: we're {key}."), key)],
               lambda f, who=who, newer=newer: [_q(f, f"Where is {who} relocating?", newer, "update")])
    elif kind == "exam":
        subject = b.take("subject")
        when = b.session_starts[s] + 86_400 * rng.randint(5, 30)
        key = f"{subject} exam is on {day_text(when)}"
        at(s, [(who, b.news(f"My {key}, wish me luck."), key)],
           lambda f, who=who, subject=subject, when=when: [
               _q(f, f"When does {who} sit the {subject} test?", day_text(when), "temporal")])
    elif kind == "hobby":
        hobby = life["hobby"]
        since = datetime.fromtimestamp(b.session_starts[s], UTC) - timedelta(days=rng.randint(60, 700))
        month = f"{since.strftime('%B')} {since.year}"
        key = f"learning {hobby} since {month}"
        at(s, [(who, b.news(f"I've been {key}, it's the best part of my week."), key)],
           lambda f, who=who, hobby=hobby, month=month: [
               _q(f, f"Since when has {who} been learning {hobby}?", month, "temporal")])
    elif kind == "photo":
        item, colour, scene = b.take("item"), rng.choice(COLOURS), rng.choice(SCENES)
        key = f"{colour} {item} {scene}"
        at(s, [(who, f"[shares a photo of a {key}] Look what I got! Took it out for the first time.", key)],
           lambda f, who=who, item=item, colour=colour: [
               _q(f, f"What colour is the {ITEM_ASKED[item]} in the picture {who} posted?", colour, "photo")])
    elif kind == "friend":
        name, role, company = b.take("given"), b.take("role"), b.take("company")
        key = f"friend {name} just got a job as a {role} at {company}"
        at(s, [(who, b.news(f"My {key}, we're celebrating tonight."), key)],
           lambda f, name=name, role=role, company=company: [
               _q(f, f"What job did {name} get?", role, "third-party"),
               _q(f, f"Which company hired {name}?", company, "third-party")])
    elif kind == "job" and s < sessions - 2:
        first_job, second_job, role = b.take("company"), b.take("company"), b.take("role")
        later = rng.randrange(s + 1, sessions)
        key1, key2 = f"job at {first_job} as a {role}", f"left {first_job} and joined {second_job}"
        early = _Fact(s, [(who, b.news(f"I started a new {key1}, first day was intense."), key1)], lambda f: [])
        late = _Fact(later, [(who, b.news(f"Big news: I {key2}."), key2)],
                     lambda f, who=who, second_job=second_job, early=early, first_job=first_job: [
                         _q(f, f"Where does {who} work now?", second_job, "update"),
                         Question(f"Where did {who} work before {second_job}?", first_job,
                                  [early.indices[0], f.indices[0]], [early.turn_texts[0][2], key2], "multi-hop")]
                     if early.written else [])
        facts.extend([early, late])
