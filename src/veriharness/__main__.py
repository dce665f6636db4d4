from veriharness.cli import main

raise SystemExit(main())
