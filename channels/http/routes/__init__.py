"""The API's routes, one ``APIRouter`` per resource; ``create_app`` includes them.

Each route reaches the app it serves through the dependencies in ``..deps``
(``request.app.state.maiden``), so the routers are module-level.
"""

from .approvals import router as approvals
from .erasure import router as erasure
from .feedback import router as feedback
from .files import router as files
from .hooks import router as hooks
from .memories import router as memories
from .runs import router as runs
from .schedules import router as schedules
from .service import router as service
from .threads import message_router
from .threads import router as threads

__all__ = ["approvals", "erasure", "feedback", "files", "hooks", "memories", "message_router",
           "runs", "schedules", "service", "threads"]
