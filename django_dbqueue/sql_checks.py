"""dbqueue_enqueue()'s checks of a call, in SQL (see sql_contract.py):
what it refuses, in the words of its errors, and its JSON checks, which
differ per server. MariaDB's JSON is text with JSON functions of its own
(JSON_COMPACT); MySQL parses JSON into a type that keeps integers of 64
bits, refuses numbers beyond a double and prints a space after each ','
and ':' between values, and its SIGNAL takes at most 128 characters."""

PROCEDURE = "dbqueue_enqueue"
# The most digits Python converts to an int by default (sys.int_info).
INT_DIGITS = 4300


def sql_text(value: str) -> str:
    """``value`` as a MySQL string literal (backslash escapes on, as by default)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


# What the procedure refuses, in the words of its SQL error (SQLSTATE 45000).
REFUSALS = {
    "task_path": (
        "task_path must be a dotted path such as myapp.tasks.send_welcome, of at most 255 characters."
    ),
    "args_json": "args is not valid JSON (or is nested more than 31 lists or objects deep).",
    "args_type": 'args must be a JSON array, such as [42, "text"].',
    "kwargs_json": "kwargs is not valid JSON (or is nested more than 31 lists or objects deep).",
    "kwargs_type": 'kwargs must be a JSON object, such as {"user_id": 42}.',
    "depth": "args and kwargs may be nested at most 31 lists or objects deep.",
    "queue_length": "the queue name must be 1 to 64 characters long.",
    "priority": "priority must be between -100 and 100.",
    "max_attempts": "max_attempts must be at least 1.",
    "long_integer": (
        f"args and kwargs hold an integer of more than {INT_DIGITS:,} digits, more than Python "
        "converts; send such numbers as strings."
    ),
    # MySQL's SIGNAL takes at most 128 characters: those it raises fit.
    "not_finite": (
        "args and kwargs hold a number at or beyond the largest double (1.7976931348623157e308); "
        "send it as a string."
    ),
    "wide_integer": (
        "args and kwargs hold an integer beyond 64 bits, which MySQL's JSON would round; send it as a string."
    ),
}
# An integer that may be beyond 64 bits (on MySQL: -2**63 to 2**64 - 1 is
# kept), not a fraction's or an exponent's digits: a negative one of 19
# digits or more, a positive one of 20 or more. Whether it is inside a
# string is counted apart.
# (MySQL's parser refuses an integer of more than about 310 digits.)
WIDE_TOKEN = "(?<![0-9.eE+-])(-[0-9]{19,400}|[0-9]{20,400})(?![0-9.eE])"
# The characters of the arguments' text each regular expression reads (MySQL).
WINDOW = 16384
# An escaped backslash and an escaped quote, as SQL literals.
_BACKSLASHES = "'\\\\\\\\'"
_QUOTE = "'\\\\\"'"


def refuse(reason: str) -> str:
    return signal(sql_text(f"{PROCEDURE}: {REFUSALS[reason]}"))


def signal(message: str) -> str:
    return f"SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = {message};"


def mariadb_json_checks(limit: int) -> str:
    return f"""    IF JSON_VALID(v_args) IS NOT TRUE THEN
        {refuse("args_json")}
    END IF;
    IF JSON_TYPE(v_args) <> 'ARRAY' THEN
        {refuse("args_type")}
    END IF;
    IF JSON_VALID(v_kwargs) IS NOT TRUE THEN
        {refuse("kwargs_json")}
    END IF;
    IF JSON_TYPE(v_kwargs) <> 'OBJECT' THEN
        {refuse("kwargs_type")}
    END IF;
    IF JSON_DEPTH(v_args) > 32 OR JSON_DEPTH(v_kwargs) > 32 THEN
        {refuse("depth")}
    END IF;
    -- As enqueue() measures: compact JSON, in UTF-8 bytes.
    SET v_size = LENGTH(JSON_COMPACT(v_args)) + LENGTH(JSON_COMPACT(v_kwargs));
    {size_check(limit, signal_message(True))}
    -- Numbers Python cannot read back: an integer of more digits than it
    -- converts, or a float beyond a double. Only text with 210 digits in a
    -- row or an exponent of 100 or more can hold one (strings included, so
    -- the test is cheap): just then is every value looked at, as JSON, so
    -- that digits inside strings never count.
    IF CONCAT(v_args, ' ', v_kwargs) REGEXP '[0-9]{{210}}|[eE][+]?0*[1-9][0-9]{{2}}' THEN
        SELECT COALESCE(SUM(j REGEXP '^-?[0-9]{{{INT_DIGITS + 1},}}$'), 0),
               COALESCE(SUM(j REGEXP '^-?[0-9]+[.eE]' AND ABS(d) >= 1.7976931348623157e308), 0)
            INTO v_long, v_huge
            FROM (SELECT j, d FROM JSON_TABLE(JSON_EXTRACT(v_args, '$**[*]', '$**.*'),
                      '$[*]' COLUMNS (j JSON PATH '$', d DOUBLE PATH '$')) AS a
                  UNION ALL
                  SELECT j, d FROM JSON_TABLE(JSON_EXTRACT(v_kwargs, '$**[*]', '$**.*'),
                      '$[*]' COLUMNS (j JSON PATH '$', d DOUBLE PATH '$')) AS k) AS scalars
            -- Containers convert to NULL; a float beyond a double, to the largest one.
            WHERE d IS NOT NULL;
        IF v_long > 0 THEN
            {refuse("long_integer")}
        END IF;
        IF v_huge > 0 THEN
            {refuse("not_finite")}
        END IF;
    END IF;
"""


def signal_message(mariadb: bool) -> str:
    """SIGNAL v_message; MySQL refuses a message of more than 128 characters
    (1648), and SIGNAL takes no expression."""
    cut = "" if mariadb else "SET v_message = LEFT(v_message, 128);\n        "
    return cut + signal("v_message")


def size_check(limit: int, signal: str) -> str:
    return f"""IF v_size > {limit} THEN
        SET v_message = CONCAT('dbqueue_enqueue: args and kwargs take ', v_size,
            ' bytes as compact JSON, more than the limit of {limit} ',
            '(MAX_ARGUMENTS_BYTES).');
        {signal}
    END IF;"""


MYSQL_DECLARATIONS = """
    DECLARE v_args_doc, v_kwargs_doc JSON;
    DECLARE v_reason TEXT;
    DECLARE v_text, v_before LONGTEXT;
    DECLARE v_at, v_from, v_quotes, v_wide, v_start BIGINT DEFAULT 0;
    DECLARE v_window TEXT;
    DECLARE v_token TEXT;"""


def _mysql_parse(name: str) -> str:
    """``v_<name>`` parsed into ``v_<name>_doc``, or refused. MySQL's parser
    raises errors where MariaDB's JSON_VALID answers 0: for a number beyond
    a double (3141, as MySQL refuses to store one) and for nesting past 100
    levels (3157); JSON_VALID itself raises the latter."""
    return f"""SET v_reason = NULL;
    BEGIN
        DECLARE CONTINUE HANDLER FOR 3141, 3157 GET DIAGNOSTICS CONDITION 1 v_reason = MESSAGE_TEXT;
        SET v_{name}_doc = CAST(v_{name} AS JSON);
    END;
    IF v_reason LIKE '%Number too big%' THEN
        {refuse("not_finite")}
    END IF;
    IF v_reason IS NOT NULL THEN
        {refuse(f"{name}_json")}
    END IF;"""


def _mysql_spaces(doc: str) -> str:
    """The spaces MySQL prints in ``doc`` between values: one after each
    ',' and each ':', that is one per array element and two per object
    member, less one per non-empty array or object."""
    return f"""(COALESCE(JSON_LENGTH(JSON_EXTRACT({doc}, '$**[*]')), 0)
            + 2 * COALESCE(JSON_LENGTH(JSON_EXTRACT({doc}, '$**.*')), 0) - (JSON_LENGTH({doc}) > 0)
            - (SELECT COUNT(*) FROM JSON_TABLE(JSON_EXTRACT({doc}, '$**[*]', '$**.*'), '$[*]'
                   COLUMNS (a INT EXISTS PATH '$[*]', o INT EXISTS PATH '$.*')) AS t WHERE a OR o))"""


def _mysql_nesting(doc: str) -> str:
    """Whether ``doc`` nests more than 31 lists or objects. JSON_DEPTH counts
    a scalar as a level and an empty container as one: with each empty
    container given a scalar, it is the nesting plus one."""
    return f"""(JSON_DEPTH({doc}) > 32 OR JSON_DEPTH({doc}) = 32 AND JSON_DEPTH(CAST(
            REPLACE(REPLACE(CAST({doc} AS CHAR), '[]', '[0]'), '{{}}', '[0]') AS JSON)) > 32)"""


def _scalars(doc: str) -> str:
    """Each value in ``doc`` but the whole, as ``j`` (JSON) and ``d`` (as a
    double; NULL for an array or object)."""
    return f"""SELECT j, d FROM JSON_TABLE(JSON_EXTRACT({doc}, '$**[*]', '$**.*'),
            '$[*]' COLUMNS (j JSON PATH '$', d DOUBLE PATH '$')) AS t"""


def mysql_json_checks(limit: int) -> str:
    return f"""    {_mysql_parse("args")}
    IF JSON_TYPE(v_args_doc) <> 'ARRAY' THEN
        {refuse("args_type")}
    END IF;
    {_mysql_parse("kwargs")}
    IF JSON_TYPE(v_kwargs_doc) <> 'OBJECT' THEN
        {refuse("kwargs_type")}
    END IF;
    IF {_mysql_nesting("v_args_doc")} OR {_mysql_nesting("v_kwargs_doc")} THEN
        {refuse("depth")}
    END IF;
    -- As enqueue() measures: compact JSON, in UTF-8 bytes, as MySQL prints
    -- it (which decodes escapes such as \\u00e9) less the spaces it puts
    -- between values; those are counted only for a call near the limit.
    SET v_size = LENGTH(CAST(v_args_doc AS CHAR)) + LENGTH(CAST(v_kwargs_doc AS CHAR));
    IF v_size > {limit} THEN
        SET v_size = v_size - {_mysql_spaces("v_args_doc")} - {_mysql_spaces("v_kwargs_doc")};
    END IF;
    {size_check(limit, signal_message(False))}
    -- MySQL's JSON keeps integers of up to 64 bits and stores a wider one
    -- as a double, rounded. Only an integral double of 2**63 or more in
    -- size can be one (or a float written so, such as 1e20), and only then
    -- is the text looked at: each run of digits that may be such an integer
    -- counts if it is outside every string (an even number of unescaped
    -- quotes before it, counted from the run before; only strings hold
    -- backslashes) and out of range. MySQL stops a regular expression after
    -- a few milliseconds (regexp_time_limit): it reads windows of 16 KiB,
    -- each with the character before it and the 401 after it, and a
    -- window it still stops (3699, 3698) refuses the call.
    SELECT COUNT(*) INTO v_wide FROM ({_scalars("v_args_doc")} UNION ALL {_scalars("v_kwargs_doc")}) AS s
        WHERE JSON_TYPE(j) = 'DOUBLE' AND ABS(d) >= 9223372036854775808 AND d = FLOOR(d);
    IF v_wide > 0 THEN
        BEGIN
            DECLARE EXIT HANDLER FOR 3698, 3699 SET v_wide = -1;
            SET v_text = CONCAT(v_args, ' ', v_kwargs), v_from = 1, v_start = 1;
            WHILE v_start <= CHAR_LENGTH(v_text) AND v_wide > 0 DO
                SET v_window = SUBSTRING(v_text, GREATEST(v_start - 1, 1), {WINDOW + 402});
                SET v_at = REGEXP_INSTR(v_window, {sql_text(WIDE_TOKEN)}, IF(v_start > 1, 2, 1));
                WHILE v_at > 0 AND v_at <= {WINDOW} + (v_start > 1) DO
                    SET v_token = REGEXP_SUBSTR(v_window, {sql_text(WIDE_TOKEN)}, v_at);
                    SET v_at = v_at + GREATEST(v_start - 1, 1) - 1;  -- in v_text
                    SET v_before = SUBSTRING(v_text, v_from, v_at - v_from);
                    SET v_before = REPLACE(REPLACE(v_before, {_BACKSLASHES}, ''), {_QUOTE}, '');
                    SET v_quotes = v_quotes + CHAR_LENGTH(v_before) - CHAR_LENGTH(REPLACE(v_before, '"', ''));
                    IF v_quotes % 2 = 0 AND (CHAR_LENGTH(v_token) > 21 OR CAST(v_token AS DECIMAL(21))
                            NOT BETWEEN -9223372036854775808 AND 18446744073709551615) THEN
                        SET v_wide = -1;
                    END IF;
                    SET v_from = v_at + CHAR_LENGTH(v_token);
                    SET v_at = IF(v_wide < 0, 0, REGEXP_INSTR(v_window, {sql_text(WIDE_TOKEN)},
                        v_from - GREATEST(v_start - 1, 1) + 1));
                END WHILE;
                SET v_start = v_start + {WINDOW};
            END WHILE;
        END;
        IF v_wide < 0 THEN
            {refuse("wide_integer")}
        END IF;
    END IF;
"""
