"""``bnpvi-report``'s work: gather the run directories under some paths (:mod:`.runs`, with the jobs a
Hydra sweep lost, :mod:`.sweeps`), tabulate them (:mod:`.table`) and plot their traces (:mod:`.plots`)."""
