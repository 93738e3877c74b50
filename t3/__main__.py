import sys

from t3.cli import main

sys.exit(main())
