#!/usr/bin/env python3
"""Capture the scenarios in repro/ with torch, then render site/index.html. See --help."""

import sys

from backtwice.cli import main

if __name__ == "__main__":
    sys.exit(main())
