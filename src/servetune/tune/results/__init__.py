"""What was measured and what it means: the one writer (`store`), records (`result`), the ranking with its ties
(`rank`, `stats`), the recommendation (`recommend`), progress lines (`progress`) and the environment a report
records (`environment`)."""
