"""The applications controller: Application -> revision -> workflow -> member resources.

One reconcile handles one Application (``core.oam.dev/v1beta1``) on the hub, as a chain
of read-only steps (:data:`~.reconciler.STEPS`, one module each) over an
:class:`~.view.ApplicationView`, then one write phase through the kit's executor:

1. **Load revision** (:mod:`.revisions`): the content hash of its spec and the external
   Policies it names (:mod:`federation.applications.revision`); a new ``ApplicationRevision``
   ``<app>-vN`` only when the content changed, planned before any member write.
2. **Compile** (:mod:`.compilation`, :mod:`federation.applications.compile`): render components
   and traits, place each deploy step's topology through the placement engine, apply
   overrides. An Application that cannot be honoured gets ``status.status:
   renderFailed`` and a condition naming the field; nothing is written anywhere else.
3. **Requests** (:mod:`.requests`): ``fedctl app resume|restart|rollback`` come as
   annotations, each with a nonce the status records once handled (acted on once).
4. **Rollback** (:mod:`.rollback`): a recorded rollback deploys its revision everywhere.
5. **Observe health** (:mod:`.health`): each reached cluster's objects, from the caches.
6. **Evaluate workflow** (:mod:`.evaluation`, the pure :mod:`federation.applications.workflow`):
   the state stored in ``status.workflow`` advanced with that health and the clock.
7. **Plan deploy** (:mod:`.deploy`): what every (deploy step, cluster) the workflow has
   reached must hold, diffed against the ResourceTracker (:mod:`federation.applications.tracker`):
   namespaces first, then each object create/update/nothing.
8. **Plan prune** (:mod:`.prune`): deletes of what is no longer rendered where it is.

Member copies are written directly, not through hub templates and bindings, because a
staged rollout holds *different* revisions of one object in different clusters at once,
which one hub template cannot express. After the writes, :mod:`.record` plans the
ResourceTracker ``<app>`` (every object placed, with its cluster and revision; what could
not be deleted yet is listed under ``pendingCleanup``) and the revisions' bookkeeping
(outcome, garbage collection), executed the same way; then the Application's status is
written (:mod:`.status`), each only when it changed; then the Events, and the
notification steps' messages (:mod:`.notify`). A deleted Application is cleaned up by
:mod:`.finalise`.

Every write but the Application's own status is a plan vertex run by the kit's executor
(deny list and identity checks). This package imports no other controller; besides the
kit it has its own notification sender (:mod:`.notifications`) and uses the kit's kind
tracker (:mod:`federation.controllers.kit.kinds`, ``status_only``, for the watch predicate).
"""

from federation.controllers.applications.notify import notification_failed
from federation.controllers.applications.reconciler import STEPS, Reconciler
from federation.controllers.applications.settings import (
    APP_ANNOTATION,
    APP_KIND,
    RESTART,
    RESUME,
    ROLLBACK,
    ApplicationSettings,
)
from federation.controllers.applications.view import ApplicationView, CacheView, HubStatus
from federation.controllers.applications.wiring import (
    app_of,
    apps_in_namespace,
    apps_of_namespace,
    grant_changed,
    install,
    on_member_available,
    tracker_app,
    trackers_in,
)

__all__ = ["APP_ANNOTATION", "APP_KIND", "RESTART", "RESUME", "ROLLBACK",
           "STEPS", "ApplicationSettings", "ApplicationView", "CacheView", "HubStatus",
           "Reconciler", "app_of", "apps_in_namespace", "apps_of_namespace", "grant_changed",
           "install", "notification_failed", "on_member_available", "tracker_app",
           "trackers_in"]
