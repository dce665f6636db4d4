"""Helpers every stage shares: hashing, atomic writes and run-file readers, YAML reading,
redaction of secret values, tesseract OCR, finding the external programs (claude, Chromium,
tesseract, bwrap) and the project checkout, helper processes that end with their parent, and the
harness's own version. Private to the package; nothing here knows about a stage or the run
folder's files (`run_files` is the one left that does, on its way into `runfolder/`)."""
