"""Authorization in one place: every served API's declaration of what it needs
(`rules.py`), applied by the dispatcher before the handler runs (`gate.py`)."""
