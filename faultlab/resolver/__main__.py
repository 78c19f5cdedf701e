"""`python -m faultlab.resolver SPEC_JSON`: the lab's resolver (faultlab.resolver.server)."""

import sys

from faultlab.resolver.server import main

sys.exit(main(sys.argv[1:]))
