"""Imported first in the fork server that the tool's workers are forked from (``process.worker_pool``): the server
is killed the moment the tool dies, as each worker is. Imported for that alone; nothing else imports it."""

from hetero_dse.process import die_with_parent

die_with_parent()
