"""Every backend of this repository runs the contract suite as any backend would."""

from tasuki.testing.contract import *  # noqa: F403
