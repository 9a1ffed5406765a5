"""Source rewrites: libcst codemods that apply the rules' fixes at their findings."""
