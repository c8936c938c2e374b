"""Files people share and tools return: references (``refs``), what a blob is
(``inspect``) and how a model is shown it (``parts``). The runtime's ``Files`` (in
``runtime.engine.files``) takes them in, stores them and loads them for a request."""

from .inspect import describe_blob, image_tokens, looks_like_html
from .parts import DocumentPart, FilePart, ImagePart, Seeing, TextPart, gone_part, to_part
from .refs import BlobInfo, FileKind, FileRef, FileSource, file_kind, human_size, media_type_of

__all__ = ["BlobInfo", "DocumentPart", "FileKind", "FilePart", "FileRef", "FileSource",
           "ImagePart", "Seeing", "TextPart", "describe_blob", "file_kind", "gone_part",
           "human_size", "image_tokens", "looks_like_html", "media_type_of", "to_part"]
