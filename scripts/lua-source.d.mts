export declare const luaRoot: string;
/** A script from lua/ with its included fragments pasted in. */
export declare function luaSource(path: string): string;
