"""What an experiment says: the file's schema (`experiment.Experiment`), its loading with line numbers
(`loader`), every issue found before a launch (`checks`, `issues`) and a variant's identity (`variants`)."""
