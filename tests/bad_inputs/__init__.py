"""Bad inputs for freezeview: a catalogue of builders, damaged-archive fuzzing, a summary.

``catalogue.CATALOGUE`` lists every bad input with the answer freezeview owes;
``fuzz.make_variant`` makes replayable damaged archives; ``run.run_cli`` runs the real
console script and classifies how it ended; ``summary.py`` prints the table.
"""
