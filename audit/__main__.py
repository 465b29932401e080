import sys

from audit.console.cli import main

sys.exit(main())
