/**
 * What a TypeScript user of a package sees: its declarations (.d.ts) as a strict consumer compiles
 * them, and every `any` reachable from its entry point's exports (members, parameters, returns,
 * type arguments), named by the path that reaches it.
 */
import path from 'node:path';
import ts from 'typescript';

/**
 * Type-checks `entry` (a .d.ts) as a consumer with `strict` and no skipLibCheck would, with
 * `consumers` (programs using it), and lists every `any` reachable from its exports. `dir` bounds
 * what is "the package": types declared elsewhere (lib.dom, @types/node) are looked into only
 * through their type arguments.
 */
export function findAny(entry: string, dir: string, consumers: string[] = []): { diagnostics: string[]; anys: string[] } {
  const program = ts.createProgram([entry, ...consumers], {
    strict: true,
    noEmit: true,
    skipLibCheck: false,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ['lib.es2023.d.ts', 'lib.dom.d.ts', 'lib.dom.iterable.d.ts', 'lib.esnext.disposable.d.ts'],
    types: ['node'],
  });
  const inPackage = (file: string) => path.resolve(file).startsWith(path.resolve(dir) + path.sep);
  // Only the package's own files are checked (lib.dom and @types/node are not ours to judge, and slow).
  const checked = new Set(consumers.map((f) => path.resolve(f)));
  const ours = program.getSourceFiles().filter((f) => inPackage(f.fileName) || checked.has(path.resolve(f.fileName)));
  const diagnostics = [...program.getGlobalDiagnostics(), ...ours.flatMap((f) => [...program.getSyntacticDiagnostics(f), ...program.getSemanticDiagnostics(f)])].map(
    (d) => `${d.file ? path.relative(process.cwd(), d.file.fileName) : ''}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`,
  );
  const checker = program.getTypeChecker();
  const anys = new Set<string>();
  const seen = new Set<ts.Type>();
  const declaredHere = (t: ts.Type) => (t.aliasSymbol ?? t.getSymbol())?.declarations?.some((d) => inPackage(d.getSourceFile().fileName)) ?? false;

  const walk = (type: ts.Type, where: string): void => {
    if (type.flags & ts.TypeFlags.Any) {
      anys.add(where);
      return;
    }
    if (seen.has(type)) return;
    seen.add(type);
    for (const arg of type.aliasTypeArguments ?? []) walk(arg, `${where}<>`);
    if (type.isUnionOrIntersection()) return type.types.forEach((t) => walk(t, where));
    if (!(type.flags & ts.TypeFlags.Object)) return;
    if ((type as ts.ObjectType).objectFlags & ts.ObjectFlags.Reference) {
      checker.getTypeArguments(type as ts.TypeReference).forEach((t, i) => walk(t, `${where}<${i}>`));
    }
    if (!declaredHere(type)) return; // Promise, Headers, AbortSignal: their own members are not the package's
    for (const prop of checker.getPropertiesOfType(type)) {
      // `#private` stands for private fields (unreachable, typed any in every .d.ts); a generic class's
      // `prototype` is typed with `any` arguments by TypeScript itself.
      if (prop.name === '#private' || prop.name === 'prototype') continue;
      const decl = prop.valueDeclaration ?? prop.declarations?.[0];
      walk(decl ? checker.getTypeOfSymbolAtLocation(prop, decl) : checker.getTypeOfSymbol(prop), `${where}.${prop.name}`);
    }
    for (const [kind, sigs] of [
      ['()', type.getCallSignatures()],
      ['new()', type.getConstructSignatures()],
    ] as const) {
      for (const sig of sigs) {
        for (const p of sig.getParameters()) walk(checker.getTypeOfSymbol(p), `${where}${kind}.${p.name}`);
        walk(sig.getReturnType(), `${where}${kind}→`);
      }
    }
    for (const info of checker.getIndexInfosOfType(type)) walk(info.type, `${where}[]`);
  };

  const source = program.getSourceFile(entry)!;
  const moduleSymbol = checker.getSymbolAtLocation(source)!;
  for (const exported of checker.getExportsOfModule(moduleSymbol)) {
    const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
    if (symbol.flags & (ts.SymbolFlags.Type | ts.SymbolFlags.Class)) walk(checker.getDeclaredTypeOfSymbol(symbol), exported.name);
    if (symbol.flags & ts.SymbolFlags.Value) walk(checker.getTypeOfSymbol(symbol), `${exported.name}(value)`);
  }
  return { diagnostics, anys: [...anys].sort() };
}
