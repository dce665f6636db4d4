"""The run folder: the contract between the stages.

One module per file of `results/<experiment>/<condition>/<task>/r<k>/`, each holding the file's
name, the model its writer uses and a lenient reader (`_files` says what lenient means). Every
stage reads and writes a run file through this package; nothing else parses one.
"""
