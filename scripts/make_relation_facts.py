"""Write probes/data/relation_facts.jsonl: hand-written facts for relation-neuron experiments."""
import json
import random
import sys

COUNTRIES = [  # country, capital, language, currency, continent
    ("France", "Paris", "French", "euro", "Europe"),
    ("Germany", "Berlin", "German", "euro", "Europe"),
    ("Italy", "Rome", "Italian", "euro", "Europe"),
    ("Spain", "Madrid", "Spanish", "euro", "Europe"),
    ("Portugal", "Lisbon", "Portuguese", "euro", "Europe"),
    ("Greece", "Athens", "Greek", "euro", "Europe"),
    ("Netherlands", "Amsterdam", "Dutch", "euro", "Europe"),
    ("Poland", "Warsaw", "Polish", "zloty", "Europe"),
    ("Sweden", "Stockholm", "Swedish", "krona", "Europe"),
    ("Norway", "Oslo", "Norwegian", "krone", "Europe"),
    ("Denmark", "Copenhagen", "Danish", "krone", "Europe"),
    ("Finland", "Helsinki", "Finnish", "euro", "Europe"),
    ("Russia", "Moscow", "Russian", "ruble", "Europe"),
    ("Ukraine", "Kyiv", "Ukrainian", "hryvnia", "Europe"),
    ("Hungary", "Budapest", "Hungarian", "forint", "Europe"),
    ("Czech Republic", "Prague", "Czech", "koruna", "Europe"),
    ("Austria", "Vienna", "German", "euro", "Europe"),
    ("Ireland", "Dublin", "English", "euro", "Europe"),
    ("United Kingdom", "London", "English", "pound", "Europe"),
    ("Turkey", "Ankara", "Turkish", "lira", "Asia"),
    ("Japan", "Tokyo", "Japanese", "yen", "Asia"),
    ("China", "Beijing", "Chinese", "yuan", "Asia"),
    ("India", "New Delhi", "Hindi", "rupee", "Asia"),
    ("South Korea", "Seoul", "Korean", "won", "Asia"),
    ("Thailand", "Bangkok", "Thai", "baht", "Asia"),
    ("Vietnam", "Hanoi", "Vietnamese", "dong", "Asia"),
    ("Indonesia", "Jakarta", "Indonesian", "rupiah", "Asia"),
    ("Pakistan", "Islamabad", "Urdu", "rupee", "Asia"),
    ("Iran", "Tehran", "Persian", "rial", "Asia"),
    ("Israel", "Jerusalem", "Hebrew", "shekel", "Asia"),
    ("Saudi Arabia", "Riyadh", "Arabic", "riyal", "Asia"),
    ("Egypt", "Cairo", "Arabic", "pound", "Africa"),
    ("Kenya", "Nairobi", "Swahili", "shilling", "Africa"),
    ("Nigeria", "Abuja", "English", "naira", "Africa"),
    ("South Africa", "Pretoria", "English", "rand", "Africa"),
    ("Ethiopia", "Addis Ababa", "Amharic", "birr", "Africa"),
    ("Morocco", "Rabat", "Arabic", "dirham", "Africa"),
    ("Ghana", "Accra", "English", "cedi", "Africa"),
    ("United States", "Washington", "English", "dollar", "North America"),
    ("Canada", "Ottawa", "English", "dollar", "North America"),
    ("Mexico", "Mexico City", "Spanish", "peso", "North America"),
    ("Cuba", "Havana", "Spanish", "peso", "North America"),
    ("Brazil", "Brasilia", "Portuguese", "real", "South America"),
    ("Argentina", "Buenos Aires", "Spanish", "peso", "South America"),
    ("Chile", "Santiago", "Spanish", "peso", "South America"),
    ("Peru", "Lima", "Spanish", "sol", "South America"),
    ("Colombia", "Bogota", "Spanish", "peso", "South America"),
    ("Venezuela", "Caracas", "Spanish", "bolivar", "South America"),
    ("Australia", "Canberra", "English", "dollar", "Oceania"),
    ("New Zealand", "Wellington", "English", "dollar", "Oceania"),
]
DEMONYM = {"Netherlands": "Dutch", "Austria": "Austrian", "Ireland": "Irish",
    "United Kingdom": "British", "India": "Indian", "Pakistan": "Pakistani", "Iran": "Iranian",
    "Israel": "Israeli", "Saudi Arabia": "Saudi", "Egypt": "Egyptian", "Kenya": "Kenyan",
    "Nigeria": "Nigerian", "South Africa": "South African", "Ethiopia": "Ethiopian",
    "Morocco": "Moroccan", "Ghana": "Ghanaian", "United States": "US", "Canada": "Canadian",
    "Mexico": "Mexican", "Cuba": "Cuban", "Brazil": "Brazilian", "Argentina": "Argentine",
    "Chile": "Chilean", "Peru": "Peruvian", "Colombia": "Colombian", "Venezuela": "Venezuelan",
    "Australia": "Australian", "New Zealand": "New Zealand", "South Korea": "South Korean",
    "Czech Republic": "Czech", "Indonesia": "Indonesian", "Vietnam": "Vietnamese"}
ELEMENTS = [("hydrogen", "H"), ("helium", "He"), ("lithium", "Li"), ("carbon", "C"), ("nitrogen", "N"),
    ("oxygen", "O"), ("fluorine", "F"), ("neon", "Ne"), ("sodium", "Na"), ("magnesium", "Mg"),
    ("aluminium", "Al"), ("silicon", "Si"), ("phosphorus", "P"), ("sulfur", "S"), ("chlorine", "Cl"),
    ("argon", "Ar"), ("potassium", "K"), ("calcium", "Ca"), ("titanium", "Ti"), ("chromium", "Cr"),
    ("manganese", "Mn"), ("iron", "Fe"), ("cobalt", "Co"), ("nickel", "Ni"), ("copper", "Cu"),
    ("zinc", "Zn"), ("arsenic", "As"), ("bromine", "Br"), ("krypton", "Kr"), ("silver", "Ag"),
    ("tin", "Sn"), ("iodine", "I"), ("xenon", "Xe"), ("platinum", "Pt"), ("gold", "Au"),
    ("mercury", "Hg"), ("lead", "Pb"), ("uranium", "U"), ("radon", "Rn"), ("boron", "B"),
    ("beryllium", "Be"), ("tungsten", "W")]
ANTONYMS = [("hot", "cold"), ("big", "small"), ("fast", "slow"), ("happy", "sad"), ("up", "down"),
    ("light", "dark"), ("old", "young"), ("rich", "poor"), ("strong", "weak"), ("hard", "soft"),
    ("early", "late"), ("open", "closed"), ("full", "empty"), ("high", "low"), ("long", "short"),
    ("wet", "dry"), ("thick", "thin"), ("loud", "quiet"), ("clean", "dirty"), ("true", "false"),
    ("good", "bad"), ("love", "hate"), ("win", "lose"), ("push", "pull"), ("day", "night"),
    ("black", "white"), ("north", "south"), ("east", "west"), ("left", "right"), ("inside", "outside"),
    ("above", "below"), ("before", "after"), ("first", "last"), ("heavy", "light"), ("deep", "shallow"),
    ("wide", "narrow"), ("sweet", "sour"), ("cheap", "expensive"), ("safe", "dangerous"),
    ("easy", "difficult"), ("alive", "dead"), ("friend", "enemy")]
LANDMARKS = [("the Eiffel Tower", "Paris"), ("the Colosseum", "Rome"), ("Big Ben", "London"),
    ("the Statue of Liberty", "New York"), ("the Brandenburg Gate", "Berlin"), ("the Kremlin", "Moscow"),
    ("the Sagrada Familia", "Barcelona"), ("the Acropolis", "Athens"), ("the Golden Gate Bridge", "San Francisco"),
    ("the Space Needle", "Seattle"), ("the Sydney Opera House", "Sydney"), ("the Forbidden City", "Beijing"),
    ("the Taj Mahal", "Agra"), ("the Louvre", "Paris"), ("the Vatican", "Rome"), ("Times Square", "New York"),
    ("the Hollywood sign", "Los Angeles"), ("the Leaning Tower", "Pisa"), ("Tower Bridge", "London"),
    ("Buckingham Palace", "London"), ("the Prado Museum", "Madrid"), ("the Rijksmuseum", "Amsterdam"),
    ("the CN Tower", "Toronto"), ("the White House", "Washington"), ("the Burj Khalifa", "Dubai"),
    ("Red Square", "Moscow"), ("the Alhambra", "Granada"), ("the Parthenon", "Athens"),
    ("the Blue Mosque", "Istanbul"), ("the Hagia Sophia", "Istanbul"), ("the Little Mermaid statue", "Copenhagen"),
    ("Christ the Redeemer", "Rio de Janeiro"), ("the Gateway Arch", "St. Louis"), ("the Pentagon", "Washington"),
    ("the Empire State Building", "New York"), ("the Arc de Triomphe", "Paris"), ("the Trevi Fountain", "Rome"),
    ("the Tower of London", "London"), ("the Charles Bridge", "Prague"), ("the Petronas Towers", "Kuala Lumpur"),
    ("Tokyo Tower", "Tokyo"), ("Central Park", "New York")]

TEMPLATES = {
    "capital": ["The capital of {s} is", "The capital city of {s} is"],
    "language": ["The official language of {s} is", "The main language spoken in {s} is"],
    "currency": ["The currency of {s} is the", "The official currency of {s} is the"],
    "continent": ["{s} is a country in", "{s} is located in the continent of"],
    "element_symbol": ["The chemical symbol for {s} is", "In chemistry, the symbol for {s} is"],
    "antonym": ["The opposite of {s} is", "The antonym of \"{s}\" is \""],
    "landmark_city": ["{S} is located in the city of", "{S} is a famous landmark in"],
}
FACTS = {
    "capital": [(c[0], c[1]) for c in COUNTRIES],
    "language": [(c[0], c[2]) for c in COUNTRIES],
    # the model often names the currency with its country's adjective ("Polish zloty")
    "currency": [(c[0], f"{c[3]}|{DEMONYM.get(c[0], c[2])} {c[3]}") for c in COUNTRIES],
    "continent": [(c[0], c[4]) for c in COUNTRIES],
    "element_symbol": ELEMENTS,
    "antonym": ANTONYMS,
    "landmark_city": LANDMARKS,
}


def main(out):
    """Write every fact x template as one JSONL row to the file ``out`` (30% of subjects -> test)."""
    rng = random.Random(0)
    subjects = sorted({s for facts in FACTS.values() for s, _ in facts})
    rng.shuffle(subjects)
    test_subjects = set(subjects[: len(subjects) * 3 // 10])
    rows = []
    for rel, facts in FACTS.items():
        for s, o in facts:
            for ti, t in enumerate(TEMPLATES[rel]):
                text = t.format(s=s, S=s[0].upper() + s[1:])
                rows.append({"text": text, "relation": rel, "subject": s, "object": o,
                             "template": ti, "split": "test" if s in test_subjects else "identify"})
    with open(out, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(len(rows), "rows")

if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "probes/data/relation_facts.jsonl")
