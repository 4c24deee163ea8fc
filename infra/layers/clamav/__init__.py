"""The clamav layer's build script (debs.py): a package only so that type checkers tell it from
the other layers' scripts of the same name."""
