"""What an experiment says: the file's schema (`experiment.Experiment`), its loading with line numbers
(`loader`), every issue found before a launch and its flags read once (`checks`, `issues`), a variant's identity
(`variants`), and `servetune tune`'s arguments (`args.TuneArgs`)."""
