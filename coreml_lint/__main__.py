from coreml_lint.lint.cli import main

raise SystemExit(main())
