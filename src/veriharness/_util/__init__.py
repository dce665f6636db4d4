"""Helpers every stage shares: hashing, atomic writes and run-file readers, redaction of secret
values, tesseract OCR, and finding the external programs (claude, Chromium, tesseract, bwrap) and
the project checkout. Private to the package; nothing here knows about a stage."""
