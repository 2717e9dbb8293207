"""An app module whose App cannot be built: loading it must fail with one clear line."""

from __future__ import annotations

import tasuki

app = tasuki.App("bogus://nowhere")
