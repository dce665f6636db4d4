"""Task sets from published page collections (verb `import-tasks`; no workflow rule runs it).

Reads a source folder in one of the published layouts (`layouts`) and writes a task set: one
task folder per accepted page (`task.yaml`, `reference.html` with the local files it loads, and
`reference.png` and `reference_dom.json` written by the render stage's `render_reference`), and
`manifest.yaml` (`experiment.task_set`: name, description, human version, source, importer,
every file's sha256, and every page left out with its reason; `convert`). It sits above the
stages because it renders each reference through the render stage and reads each page's
references with the score stage's parser.
"""
