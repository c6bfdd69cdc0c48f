"""The check list the Python clients of bashexec (mcp_stdlib_test.py,
mcp_http_test.py) report through: each check printed as it runs, each named
section recorded, and at the end a failure for every expected section that
never ran — a test that matched nothing must fail, never pass."""
import sys


class Checklist:
    def __init__(self, expected):
        self.expected = list(expected)
        self.ran = []
        self.failures = 0

    def check(self, name, condition, detail=""):
        if condition:
            print(f"ok   - {name}")
        else:
            self.failures += 1
            print(f"FAIL - {name}" + (f": {detail}" if detail else ""))
        return condition

    def begin(self, name):
        """A section starts (for scripts that run top to bottom)."""
        self.ran.append(name)
        print(f"# {name}")

    def section(self, name):
        """Runs the decorated function at once as section `name`; an
        exception it raises is a failure, never a pass."""
        def wrap(body):
            self.ran.append(name)
            try:
                body()
            except Exception as e:
                self.failures += 1
                print(f"FAIL - {name}: raised {type(e).__name__}: {e}")
            return body
        return wrap

    def finish(self):
        """Prints the verdict and exits: 0 only when every expected section
        ran and no check failed."""
        for name in self.expected:
            if name not in self.ran:
                self.check(f"{name} ran", False, "never ran")
        ok = self.failures == 0 and all(name in self.ran for name in self.expected)
        print(f"{'PASS' if ok else 'FAIL'}: {len(set(self.ran) & set(self.expected))} of {len(self.expected)} "
              f"sections ran, {self.failures} failure(s)")
        sys.exit(0 if ok else 1)
