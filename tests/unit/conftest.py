"""Make the checkout importable as ansible_collections.pvegpu.llmstack (make setup links it)."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
if os.path.isdir(COLLECTIONS) and COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
