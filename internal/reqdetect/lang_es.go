package reqdetect

// langES is the cue table of Spanish (rule 9; languages.go reads it).
var langES = &langTable{
	code: "es", name: "Spanish", presented: "adjunto adjuntos adjuntado adjuntada adjuntamos", attach: "anexo",
	delivery:  "adjunta* adjunte* adjúnta* adjuntes exporta* expórta* guarda guardar guarde guardes guárda* sube subir suba súbelo súbela súbelos descargable entrega* entrégal*",
	send:      "envía* envia* enviar envíe* reenvía* devuelve* devuélve* comparte* compartir",
	output:    "crea crear cree créa* escribe escribir redacta* genera generar genere prepara preparar produce elabora* haz",
	transform: "convierte* conviert* transforma* traduce* traduzca",
	input:     "lee leer lea resume resumir resuma analiza* compara* revisa* examina* usa usar utiliza* consulta* abre mira ejecuta*",
	reply:     "responde responder contesta* explica* dime", inline: "aquí aqui respuesta",
	negators: "no> nunca> ningún ninguna ninguno sin> nada", fileWords: "archivo archivos",
	model:      "plantilla modelo ejemplo basado basada basándote mismo misma igual estilo siguiendo",
	modelNouns: "plantilla modelo ejemplo", destPreps: "como a", namingPreps: "como", sourcePreps: "desde a_partir_de datos_de copia_de",
	productNouns: "botón boton comando herramienta programa función aplicación servicio opción funcionalidad endpoint exportador",
	featureVerbs: "añade* agrega* implementa* incorpora*",
	whWords:      "quién qué cuándo cuál cómo dónde ¿cómo ¿qué ¿dónde ¿cuál", perfect: "he has ha hemos han ya",
	function:     "un los las y con por para una del este esta que aquí el es muy pero tu su sus lo se hay cuando nada también",
	deliverables: "entregables entregable archivos_de_salida resultados_esperados a_entregar",
	inputs:       "entradas archivos_de_entrada contexto antecedentes referencias fuentes adjuntos situación datos_de_entrada materiales",
	edit:         "actualiza* corrige* corrección correcciones modifica* ajusta* arregla* edita* repara* cambia*",
	naming:       "llama* llámalo llámala nombra* titula*", polite: "por_favor porfa", repo: "rama prueba pruebas test",
	bug: "error", nounMarks: "del", pointers: "este esta", clitics: "lo la los las",
	other:  "otro* otra* adicional*",
	toward: "al",
}
