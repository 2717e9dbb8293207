"""The values every other part of tasuki speaks in. Nothing here imports anything above
the core (only `tasuki.errors` and `tasuki.logs`, which import nothing of tasuki)."""
