from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from django_dbqueue import sql_contract


class Command(BaseCommand):
    help = (
        "Create (or re-create) the dbqueue_enqueue() procedure of the SQL contract on a MySQL/MariaDB "
        "database, with the QUEUES and limits configured now; --print writes the SQL instead, for a "
        "user who may create routines."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS, help="Database alias (default: default).")
        parser.add_argument(
            "--print", action="store_true", help="Print the SQL for the mariadb/mysql client; change nothing."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        alias = options["database"]
        if alias not in connections:
            raise CommandError(f"No database {alias!r} in settings.DATABASES.")
        connection = connections[alias]
        if connection.vendor != "mysql":
            raise CommandError(
                f"The database {alias!r} is {connection.vendor}: the procedure is for MySQL/MariaDB only. "
                "Producers on other databases use a plain INSERT (docs/sql-contract.md)."
            )
        if options["print"]:
            statements = sql_contract.install_statements(connection)
            self.stdout.write("DELIMITER //\n" + "".join(f"{s}\n//\n" for s in statements) + "DELIMITER ;")
            return
        try:
            sql_contract.install(connection)
        except DatabaseError as exc:
            if sql_contract.error_code(exc) in sql_contract.NOT_PERMITTED:
                raise CommandError(sql_contract.not_permitted_message(alias, exc).strip()) from exc
            raise
        config = sql_contract.config_for(alias)
        self.stdout.write(
            f"Installed {sql_contract.PROCEDURE}() (SQL contract {sql_contract.VERSION}) on {alias!r}: "
            f"queues {', '.join(config.queues) or 'any'}, max_attempts {config.max_attempts} by default."
        )
